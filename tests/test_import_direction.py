"""Imports point one way: command line -> library -> records/io/types.

Every module under ``sweet_rl/`` is parsed (not imported, so no heavy dependency loads) and
every import it makes, at the top or inside a function, is checked against the layering.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sweet_rl"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path):
    """The absolute names of the modules ``path`` imports (``from x import y``: x and x.y)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the module's own package
                anchor = package[:len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"


MODULES = {_module_name(p): sorted(set(_imports(p))) for p in sorted(PACKAGE.rglob("*.py"))}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offenders(importer: str, imported: str):
    return sorted(f"{module} imports {name}" for module, names in MODULES.items()
                  if _within(module, importer) for name in names if _within(name, imported))


def test_the_parser_sees_the_package():
    assert "sweet_rl.cli.main" in MODULES and "sweet_rl.types" in MODULES
    assert "sweet_rl.types" in MODULES["sweet_rl.openai_compat"]


def test_only_the_command_line_imports_the_command_line():
    found = [line for line in _offenders("sweet_rl", "sweet_rl.cli")
             if not line.startswith("sweet_rl.cli")]
    assert found == []


def test_only_the_command_line_and_the_recipes_import_the_recipes():
    found = [line for line in _offenders("sweet_rl", "sweet_rl.recipes")
             if not line.startswith(("sweet_rl.cli", "sweet_rl.recipes"))]
    assert found == []


@pytest.mark.parametrize("importer,imported", [
    ("sweet_rl.stepwise", "sweet_rl.evaluation"),
    ("sweet_rl.stepwise", "sweet_rl.training"),
    ("sweet_rl.environments", "sweet_rl.simulators"),
    ("sweet_rl.environments", "sweet_rl.agents"),
    ("sweet_rl.openai_compat", "sweet_rl.simulators"),
    ("sweet_rl.openai_compat", "sweet_rl.agents"),
])
def test_library_layers(importer, imported):
    assert _offenders(importer, imported) == []


@pytest.mark.parametrize("bottom", ["sweet_rl.types", "sweet_rl.records", "sweet_rl.io"])
def test_the_bottom_layer_imports_only_itself(bottom):
    """types, records and io are what everything else builds on: they reach nothing above."""
    allowed = ("sweet_rl.types", "sweet_rl.records", "sweet_rl.io")
    above = [name for name in MODULES[bottom] if _within(name, "sweet_rl")
             and name not in ("sweet_rl", "sweet_rl.__version__")
             and not any(_within(name, low) for low in allowed)]
    assert above == []


def test_no_probing_for_our_own_interfaces():
    """Declared interfaces (CollaborationEnv.prepare/record_workers, SpanScorer.score_many,
    records.Record) instead of ``hasattr`` checks."""
    probes = [
        f"{p.relative_to(PACKAGE.parent)}:{node.lineno}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "hasattr"
    ]
    assert probes == []
