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
