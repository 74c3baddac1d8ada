"""Every script answers --help with our own help (sweet_rl/flags/help.py), at once and without
importing torch (heavy imports stay inside stages); tests/test_help.py checks its content."""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

SCRIPTS = sorted(p for p in (REPO_ROOT / "scripts").glob("*.py")) + sorted(
    p for p in (REPO_ROOT / "visualizers").glob("visualize_*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help(script):
    probe = ("import runpy, sys; sys.argv = [sys.argv[1], '--help']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "assert 'torch' not in sys.modules, 'torch imported for --help'\n")
    result = subprocess.run(
        [sys.executable, "-c", probe, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env={"PAGER": "cat", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # our help goes to stdout, and nothing else is printed
    shown = result.stdout
    assert shown.startswith(f"usage: {script.name} ")
    assert "FLAGS" in shown or "POSITIONAL ARGUMENTS" in shown
    for fire_help in ("Showing help", "Optional[", "NAME\n"):  # fire's help is gone
        assert fire_help not in shown


def test_step_stage_scripts_are_covered():
    names = {p.name for p in SCRIPTS}
    assert {"sample_best_of_n.py", "rank_best_of_n.py",
            "generate_random_pairs_from_ranks.py"} <= names
