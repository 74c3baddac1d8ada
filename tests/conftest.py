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
    "tests/fidelity/test_grading_table.py",  # the whole table graded in the sandbox at once
    "tests/test_mini_reproduction.py",  # every stage of every method, reduced (minutes)
}
# single tests that run a stage's script end to end in a subprocess (5-12 s each here)
SLOW_TESTS = {
    "tests/cli/test_mini_best_of_n.py::test_curve_on_held_out_tasks_with_a_real_critic",
    "tests/fidelity/test_stepwise_pairs.py::test_stepwise_pairs_no_prompt_through_the_script",
    "tests/fidelity/test_stepwise_sample.py::"
    "test_stepwise_sample_defaults_to_the_originals_agent_and_says_so",
    "tests/training/test_train_dpo.py::test_script_exits_2_on_bad_input_and_leaves_save_path_alone",
    # the VLM critic under DeepSpeed's launcher, ZeRO-3 with two processes (about 35 s here)
    "tests/training/test_deepspeed_vlm.py::test_zero3_vlm_head_saves_gathered_and_loads",
    "tests/grading/test_sandbox_values.py::test_large_and_deep_values_come_through_and_compare",
    "tests/cli/test_prepare_frontend.py::test_bad_source_via_cli_exits_nonzero_and_writes_nothing",
    "tests/cli/test_simulate_evaluate.py::test_killed_run_resumes_with_every_row_exactly_once",
    "tests/simulators/test_scripted_simulator.py::"
    "test_simulate_script_with_the_tiny_agent_and_the_scripted_human",
    # the warm-start recipe end to end, reduced (about 2.5 minutes here)
    "tests/data/test_mini_warm_start.py::test_reduced_warm_start_follows_the_protocol",
    # build_mini_agent.sh's trainings until the copy check passes (two tiny builds)
    "tests/cli/test_mini_copy_check.py::test_the_build_trains_again_until_the_agent_copies",
    "tests/cli/test_mini_copy_check.py::test_a_bar_that_is_met_keeps_the_first_training",
    # the README's local-server recipe: transformers serve and a 2-dialogue simulate
    "tests/cli/test_newcomer_mistakes.py::test_the_readme_local_server_recipe_works_when_pasted",
    # the learning test: the quick miniature's warm start, SWEET-RL and Best-of-8
    "tests/test_mini_learning.py::test_sweet_rl_beats_zero_shot_and_its_critic_beats_random_choice",
    # the GPU check's CPU dry run: every step, the miniature included, with tiny sizes (minutes)
    "tests/test_gpu_check.py::test_dry_run_goes_through_every_step_on_the_cpu",
}
SLOW_FIXTURES = {"render_assets"}  # real Chromium

# The `vllm` marker (registered in pyproject.toml): every test under tests/vllm/ runs vLLM's
# engine for real, on the CPU through vLLM's CPU build, in the second test environment
# (scripts/vllm_env.sh; `.venv-vllm/bin/python -m pytest -q -m vllm tests/vllm`). They are slow
# too, and skipped where vLLM is not installed (the main environment).
VLLM_DIR = "tests/vllm/"
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(REPO_ROOT).as_posix()
        test = f"{path}::{getattr(item, 'originalname', item.name)}"
        if path in SLOW_FILES or test in SLOW_TESTS or \
                SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if path.startswith(VLLM_DIR):
            item.add_marker(pytest.mark.vllm)
            item.add_marker(pytest.mark.slow)
            if not HAS_VLLM:
                item.add_marker(pytest.mark.skip(
                    reason="needs vLLM (its CPU build: bash scripts/vllm_env.sh, then "
                           ".venv-vllm/bin/python -m pytest -q -m vllm tests/vllm)"))
