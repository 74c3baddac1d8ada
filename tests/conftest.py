"""Shared fixtures: the tiny model (built once per session) and paths."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Real ColBench task files (not in the repo): ../shared/colbench beside the checkout, or the
# folder named by SWEET_RL_COLBENCH. Tests that need one skip, saying which, when it is missing.
SHARED_COLBENCH = Path(os.environ.get("SWEET_RL_COLBENCH")
                       or REPO_ROOT.parent / "shared" / "colbench")
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Tests never reach a model hub: everything they load is built locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def colbench_file(name: str) -> Path:
    """The real ColBench file ``name`` (e.g. backend_test.jsonl), or skip the test, naming it."""
    path = SHARED_COLBENCH / name
    if not path.exists():
        pytest.skip(f"{path} is missing: this test needs the real ColBench file {name} "
                    "(../shared/colbench beside the checkout, or set SWEET_RL_COLBENCH)")
    return path


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
# real browser, a real server, DeepSpeed's launcher or a batch of hostile answers. Each such
# test carries the mark where it is defined (`pytestmark = pytest.mark.slow` for a whole file,
# `@pytest.mark.slow` for one test). The README's test command runs everything;
# `python -m pytest -q -m "not slow" tests` is the fast loop.
#
# A test that uses one of these fixtures is slow by what it starts; collection stops, naming
# it, when it lacks the mark (tests/test_markers.py checks the rule itself).
SLOW_FIXTURES = {
    "render_assets": "real Chromium",
    "shared_memory_op": "DeepSpeed's launcher",
    "served": "a real transformers serve",
    "servers": "vLLM's OpenAI servers",
}

# The files below are being rewritten by another change and get their marks in their files
# then; until that lands, these entries mark them (and their render_assets users) here.
PENDING_SLOW_FILES = {"tests/cli/test_simulate_with_server.py"}
PENDING_SLOW_TESTS = {
    "tests/cli/test_mini_best_of_n.py::test_curve_on_held_out_tasks_with_a_real_critic",
    "tests/fidelity/test_commands_readme.py::test_critic_command_trains_with_the_run_name",
    "tests/fidelity/test_commands_readme.py::test_evaluate_html_readme_command_on_original_rows",
    "tests/cli/test_prepare_frontend.py::test_bad_source_via_cli_exits_nonzero_and_writes_nothing",
    "tests/cli/test_simulate_evaluate.py::test_killed_run_resumes_with_every_row_exactly_once",
    "tests/cli/test_mini_copy_check.py::test_the_build_trains_again_until_the_agent_copies",
    "tests/cli/test_mini_copy_check.py::test_a_bar_that_is_met_keeps_the_first_training",
    "tests/cli/test_newcomer_mistakes.py::test_the_readme_local_server_recipe_works_when_pasted",
}
PENDING_FIXTURE_FILES = ("tests/cli/", "tests/fidelity/test_commands_readme.py")

# The `vllm` marker (registered in pyproject.toml): every test file under tests/vllm/ carries it
# (with `slow`): they run vLLM's engine for real, on the CPU through vLLM's CPU build, in the
# second test environment (scripts/vllm_env.sh; `.venv-vllm/bin/python -m pytest -q -m vllm
# tests/vllm`), and are skipped where vLLM is not installed (the main environment).
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def uses_slow_fixture(item) -> list:
    """The slow fixtures ``item`` uses, directly or through other fixtures."""
    return sorted(SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())))


def unmarked_slow(items) -> list:
    """Node ids of the tests that use a slow fixture but carry no `slow` mark."""
    return [item.nodeid for item in items
            if uses_slow_fixture(item) and item.get_closest_marker("slow") is None]


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(os.path.relpath(str(item.fspath), REPO_ROOT)).as_posix()
        test = f"{path}::{getattr(item, 'originalname', item.name)}"
        if path in PENDING_SLOW_FILES or test in PENDING_SLOW_TESTS or (
                path.startswith(PENDING_FIXTURE_FILES) and uses_slow_fixture(item)):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("vllm") is not None and not HAS_VLLM:
            item.add_marker(pytest.mark.skip(
                reason="needs vLLM (its CPU build: bash scripts/vllm_env.sh, then "
                       ".venv-vllm/bin/python -m pytest -q -m vllm tests/vllm)"))
    unmarked = unmarked_slow(items)
    if unmarked:
        raise pytest.UsageError(
            "these tests use a slow fixture (" + ", ".join(sorted(SLOW_FIXTURES)) + ") but are "
            "not marked slow; add @pytest.mark.slow where each is defined:\n  "
            + "\n  ".join(unmarked))
