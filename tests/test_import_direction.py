"""Imports point one way: command line -> library -> records/io/types.

Every module under ``sweet_rl/`` is parsed (not imported, so no heavy dependency loads) and
every import it makes, at the top or inside a function, is checked against the layering.
"""

import ast
import functools
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


@functools.cache
def modules() -> dict:
    """Each module's imports, parsed once a test asks (not while tests are collected)."""
    return {_module_name(p): sorted(set(_imports(p))) for p in sorted(PACKAGE.rglob("*.py"))}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offenders(importer: str, imported: str):
    return sorted(f"{module} imports {name}" for module, names in modules().items()
                  if _within(module, importer) for name in names if _within(name, imported))


def test_the_parser_sees_the_package():
    assert "sweet_rl.cli.main" in modules() and "sweet_rl.types" in modules()
    assert "sweet_rl.types" in modules()["sweet_rl.models.openai_compat"]


def test_the_top_level_holds_only_the_shared_helpers():
    """Everything else lives in a room (a package); the top level keeps the bottom layer and
    the small helpers every room shares."""
    loose = sorted(name for name in modules() if name.count(".") == 1
                   and not (PACKAGE / name.split(".")[1]).is_dir())
    assert loose == ["sweet_rl.io", "sweet_rl.layout", "sweet_rl.notices", "sweet_rl.records",
                     "sweet_rl.seeding", "sweet_rl.types"]


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
    ("sweet_rl.environments", "sweet_rl.rollouts"),
    ("sweet_rl.models", "sweet_rl.agents"),
    ("sweet_rl.models", "sweet_rl.simulators"),
    ("sweet_rl.models", "sweet_rl.environments"),
    ("sweet_rl.models", "sweet_rl.rollouts"),
    ("sweet_rl.models", "sweet_rl.stepwise"),
    ("sweet_rl.models", "sweet_rl.stages"),
    ("sweet_rl.rollouts", "sweet_rl.stages"),
])
def test_library_layers(importer, imported):
    assert _offenders(importer, imported) == []


@pytest.mark.parametrize("bottom", ["sweet_rl.types", "sweet_rl.records", "sweet_rl.io"])
def test_the_bottom_layer_imports_only_itself(bottom):
    """types, records and io are what everything else builds on: they reach nothing above."""
    allowed = ("sweet_rl.types", "sweet_rl.records", "sweet_rl.io")
    above = [name for name in modules()[bottom] if _within(name, "sweet_rl")
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


SANDBOX = "sweet_rl.grading.sandbox"


def test_sandbox_code_imports_only_the_standard_library_and_its_neighbours():
    """The trust boundary: every ``sandbox_*`` module runs in the worker or its children, which
    load their neighbours by path (``python -S``): nothing of the package above the folder, in
    particular not the grading-process modules that decode and compare what children send."""
    inside = [name for name in modules() if name.startswith(SANDBOX + ".sandbox_")]
    assert f"{SANDBOX}.sandbox_worker" in inside and f"{SANDBOX}.sandbox_values" in inside
    reached = sorted(f"{module} imports {name}" for module in inside for name in modules()[module]
                     if _within(name, "sweet_rl")
                     and not name.startswith(SANDBOX + ".sandbox_") and name != SANDBOX)
    assert reached == []
    assert "sweet_rl.grading.decode" in modules() and "sweet_rl.grading.compare" in modules()


def test_only_the_grader_side_reaches_into_the_sandbox_folder():
    """Above the folder, what the grading process uses of it is the worker's handle and the
    bounds of the wire format; nothing but tests would import the worker's own modules."""
    reached = sorted({name.split(".")[3] for module, names in modules().items()
                      if _within(module, "sweet_rl") and not _within(module, SANDBOX)
                      for name in names if name.startswith(SANDBOX + ".")})
    assert reached == ["client", "sandbox_values"]
