"""The code keeps pyproject.toml's ruff settings: pyflakes, pycodestyle, lines of at most 100."""

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


def _ruff():
    found = shutil.which("ruff") or shutil.which("ruff", path=str(REPO_ROOT / ".venv" / "bin"))
    if found:
        return [found]
    try:
        import ruff  # noqa: F401 - the wheel ships the binary beside the module
    except ImportError:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return [sys.executable, "-m", "ruff"]


def test_ruff_finds_nothing():
    done = subprocess.run(_ruff() + ["check", "--no-cache", "."], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_long_line_is_caught(tmp_path):
    # the check above would pass vacuously if ruff read no settings: a 101-column line fails
    (tmp_path / "pyproject.toml").write_text((REPO_ROOT / "pyproject.toml").read_text())
    (tmp_path / "long.py").write_text("x = '" + "a" * 95 + "'\n")  # 101 columns
    done = subprocess.run(_ruff() + ["check", "--no-cache", "."], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "E501" in done.stdout
