"""Shared fixtures: the tiny model (built once per session) and paths."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_COLBENCH = REPO_ROOT.parent / "shared" / "colbench"
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Tests never reach a model hub: everything they load is built locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    from sweet_rl.tiny_model import build_tiny_model

    return build_tiny_model(str(tmp_path_factory.mktemp("tiny-llama")), seed=0)


@pytest.fixture(scope="session")
def sample_tasks_path() -> str:
    from sweet_rl.data.tasks import SAMPLE_BACKEND_TASKS

    return SAMPLE_BACKEND_TASKS


@pytest.fixture(scope="session")
def render_assets(tmp_path_factory) -> str:
    """The Tailwind cache folder for tests that render real pages in Chromium; they are
    skipped when Chromium, chromedriver or (for an empty cache) npm is missing."""
    from tests.render_helpers import require_chromium, tailwind_assets_dir

    require_chromium()
    return tailwind_assets_dir(tmp_path_factory)


# The `slow` marker (registered in pyproject.toml): whole-pipeline runs and tests that start a
# real browser, a real server, DeepSpeed's launcher or a batch of hostile answers. The README's
# test command runs everything; `python -m pytest -q -m "not slow" tests` is the fast loop.
SLOW_FILES = {
    "tests/test_demo.py",
    "tests/training/test_deepspeed.py",
    "tests/grading/test_conformance.py",
    "tests/grading/test_adversarial.py",
    "tests/grading/test_hostile_run.py",
    "tests/rendering/test_renderer.py",
    "tests/cli/test_simulate_with_server.py",
    "tests/simulators/test_transformers_serve.py",
}
SLOW_FIXTURES = {"render_assets"}  # real Chromium


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(REPO_ROOT).as_posix()
        if path in SLOW_FILES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
