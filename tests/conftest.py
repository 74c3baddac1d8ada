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

# The suite keeps Python's bytecode caches even where PYTHONDONTWRITEBYTECODE is set (container
# images often set it): otherwise each of its processes would compile the package and rewrite
# the assertions of every test module again at every start, some 6 s per process on a 2-core
# machine. The caches are __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False

# Tests never reach a model hub: everything they load is built locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Two workers on two cores: torch's default of one thread per core in each would put four busy
# threads on two cores, and its OpenMP threads spin while they wait, so a small training step
# takes several times longer than alone. One thread per worker (and per process it starts,
# which inherit the setting) unless the caller chose a number. Set before any test imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


# ``python -c RUN_SAYING_TORCH scripts/X.py ARGS...`` runs the script as ``python scripts/X.py
# ARGS...`` would, then prints "torch imported: True/False" to stderr at exit: a stage that
# must not pay for importing torch says so
RUN_SAYING_TORCH = ("import atexit, runpy, sys\n"
                    "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules,"
                    " file=sys.stderr))\n"
                    "sys.argv = sys.argv[1:]\n"
                    "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def colbench_file(name: str) -> Path:
    """The real ColBench file ``name`` (e.g. backend_test.jsonl), or skip the test, naming it."""
    path = SHARED_COLBENCH / name
    if not path.exists():
        pytest.skip(f"{path} is missing: this test needs the real ColBench file {name} "
                    "(../shared/colbench beside the checkout, or set SWEET_RL_COLBENCH)")
    return path


def once_per_run(tmp_path_factory, name: str, compute):
    """``compute()``'s result, computed by one of the run's workers and read back (pickled) by
    the others: a module's expensive fixture whose tests pytest-xdist spreads over both
    workers otherwise runs once in each. Every worker's base temporary folder sits in one
    folder of this run (``pytest-N``); a run without workers keeps the file in its own."""
    import pickle

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = shared / f"once-{name}.pickle"
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            result = compute()
            path.write_bytes(pickle.dumps(result))
            return result
    return pickle.loads(path.read_bytes())


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    from sweet_rl.models.tiny_model import build_tiny_model

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
    "browser": "real Chromium",
    "shared_memory_op": "DeepSpeed's launcher",
    "served": "a real transformers serve",
    "servers": "vLLM's OpenAI servers",
}

# The `vllm` marker (registered in pyproject.toml): every test file under tests/vllm/ carries it
# (with `slow`): they run vLLM's engine for real, on the CPU through vLLM's CPU build, in the
# second test environment (scripts/vllm_env.sh; `.venv-vllm/bin/python -m pytest -q -n 0 -m vllm
# tests/vllm`), and are skipped where vLLM is not installed (the main environment).
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def uses_slow_fixture(item) -> list:
    """The slow fixtures ``item`` uses, directly or through other fixtures."""
    return sorted(SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())))


def unmarked_slow(items) -> list:
    """Node ids of the tests that use a slow fixture but carry no `slow` mark."""
    return [item.nodeid for item in items
            if uses_slow_fixture(item) and item.get_closest_marker("slow") is None]


def expected_seconds(item) -> float:
    """The ``about`` of the test's `slow` mark: roughly how many seconds it takes on the 2-core
    machine (given only to the longest tests); 0 without one."""
    mark = item.get_closest_marker("slow")
    return float(mark.kwargs.get("about", 0)) if mark is not None else 0.0


def longest_first(items: list) -> list:
    """The order two workers finish together in (pyproject.toml runs the suite on two, taking
    tests in this order one at a time): the tests with an ``about`` first, the longest first,
    then the others in their order. A worker is handed two tests at the start, so the longest
    test's partner is the first quick one, not the second longest, which would wait behind it."""
    timed = sorted((item for item in items if expected_seconds(item)), key=expected_seconds,
                   reverse=True)
    quick = [item for item in items if not expected_seconds(item)]
    if timed and quick:
        return timed[:1] + quick[:1] + timed[1:] + quick[1:]
    return timed + quick


def pytest_sessionstart(session):
    import time

    session.config.stash[_STARTED] = time.time()


def pytest_sessionfinish(session, exitstatus):
    """The DeepSpeed buffers the session's runs left in /dev/shm (tests/shm_cleanup.py), once
    every worker is done: only the controlling process, not an xdist worker, removes them."""
    if hasattr(session.config, "workerinput") or not os.path.isdir("/dev/shm"):
        return
    from tests.shm_cleanup import remove_stale_buffers

    remove_stale_buffers("/dev/shm", session.config.stash[_STARTED])


_STARTED = pytest.StashKey[float]()


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of a parallel run: see longest_first
        items[:] = longest_first(items)
    for item in items:
        if item.get_closest_marker("vllm") is not None and not HAS_VLLM:
            item.add_marker(pytest.mark.skip(
                reason="needs vLLM (its CPU build: bash scripts/vllm_env.sh, then "
                       ".venv-vllm/bin/python -m pytest -q -n 0 -m vllm tests/vllm)"))
    unmarked = unmarked_slow(items)
    if unmarked:
        raise pytest.UsageError(
            "these tests use a slow fixture (" + ", ".join(sorted(SLOW_FIXTURES)) + ") but are "
            "not marked slow; add @pytest.mark.slow where each is defined:\n  "
            + "\n  ".join(unmarked))
