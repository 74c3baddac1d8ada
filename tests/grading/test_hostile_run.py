"""A grading run of nothing but hostile answers ends, in bounded time, with a reward for every row.

``scripts/evaluate_code.py`` grades a trajectory file (the ColBench backend layout that
simulate writes) whose every answer is an attack of ``tests/fixtures/adversarial_answers.jsonl``
(placeholders filled by :class:`~tests.grading.hostile_helpers.HostileWorld`), run as a
user would run it: a separate process, the published rules, 1 s per test. It must exit 0
with a reward and per-test verdicts on every row, leave the honest answers between the
attacks at their scores, change nothing outside the sandbox, leave no worker process or
scratch folder behind, and finish within the worst case the sandbox promises.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.grading.hostile_helpers import (PROJECT, SECRET, HostileWorld, make_scratch_root,
                                              worker_processes)

pytestmark = pytest.mark.slow  # a whole grading run of hostile answers

SCRIPT = os.path.join(PROJECT, "scripts", "evaluate_code.py")
SANDBOX = os.path.join(PROJECT, "sweet_rl", "grading", "sandbox")
TIMEOUT = 1.0  # --timeout: seconds per test, as the fixture's expected scores assume
WORKERS = 2  # --workers: grading threads, each with a reference worker and an answer worker
# Beyond the per-test worst case: starting the interpreter and importing the grader, starting
# and warming up 2 x WORKERS workers, decoding and comparing outputs, reading and writing
# the file, on a machine of 2 busy cores
MARGIN = 60.0


def trajectory(row: dict) -> dict:
    """A backend trajectory whose final answer is ``row``'s attack."""
    description = f"adversarial answer {row['name']}"
    return {
        "task": {
            "problem_description": description,
            "ground_truth": row["ground_truth"],
            "test_cases": row["test_cases"],
        },
        "dialogue_history": [
            {"role": "user", "content": description},
            {"role": "assistant", "content": "I WANT TO ANSWER: " + row["answer"]},
        ],
        "answer": row["answer"],
    }


def record_limits() -> dict:
    """``SETUP_LIMIT`` and ``GRACE`` of sandbox_records, read as the worker reads them: that
    module imports its siblings by plain name, so it loads by path in a fresh interpreter."""
    script = (f"import json, sys; sys.path.insert(0, {SANDBOX!r}); import sandbox_records as r; "
              "print(json.dumps({'SETUP_LIMIT': r.SETUP_LIMIT, 'GRACE': r.GRACE}))")
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                          check=True, timeout=60)
    return json.loads(done.stdout)


def wall_bound(rows: list, limits: dict) -> float:
    """The longest the run may take. Per test, the worker gives a child SETUP_LIMIT seconds
    to start and the test's limit plus GRACE before it kills it (sandbox_worker's worst case
    per job: tests x (timeout + GRACE + SETUP_LIMIT)); answers are spread over WORKERS
    threads (the reference of a row runs beside its answer, in another worker):

        sum over rows of tests x (TIMEOUT + GRACE + SETUP_LIMIT) / WORKERS + MARGIN
    """
    per_test = TIMEOUT + limits["GRACE"] + limits["SETUP_LIMIT"]
    return sum(len(row["test_cases"]) for row in rows) * per_test / WORKERS + MARGIN


@pytest.fixture
def scratch():
    path = make_scratch_root()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_file_of_hostile_answers_is_graded_to_the_end_in_bounded_time(tmp_path, scratch,
                                                                       record_property):
    bound_limits = record_limits()
    with HostileWorld(tmp_path) as world:
        rows = world.load()
        path = tmp_path / "hostile.jsonl"
        path.write_text("".join(json.dumps(trajectory(row)) + "\n" for row in rows))
        bound = wall_bound(rows, bound_limits)
        env = dict(os.environ, TMPDIR=scratch, SWEET_RL_ADVERSARIAL_SECRET=SECRET)
        command = [sys.executable, SCRIPT, str(path), "--timeout", str(TIMEOUT),
                   "--memory_mb", "512", "--workers", str(WORKERS)]
        started = time.monotonic()
        done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True,
                              timeout=bound + 120)
        took = time.monotonic() - started
        problems = world.problems()
    print(f"\nhostile run: {len(rows)} rows, {sum(len(r['test_cases']) for r in rows)} tests, "
          f"{took:.1f} s (bound {bound:.1f} s)")
    record_property("wall_seconds", round(took, 1))
    record_property("bound_seconds", round(bound, 1))

    assert done.returncode == 0, done.stderr[-4000:]
    assert f"evaluate_code: {len(rows)} trajectories" in done.stdout
    assert "flood" not in done.stdout and "flood" not in done.stderr
    graded = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(graded) == len(rows)
    for row, out in zip(rows, graded):
        assert isinstance(out.get("reward"), float) and 0.0 <= out["reward"] <= 1.0, row["name"]
        assert out["grader_rules"] == "benchmark"
        verdicts = out.get("grader_tests")
        assert isinstance(verdicts, list) and len(verdicts) == len(row["test_cases"]), row["name"]
        assert all(isinstance(word, str) and word for word in verdicts), row["name"]
        if row["name"].startswith("honest"):  # attacks before them moved nothing
            assert out["reward"] == row["expected"]["benchmark"], row["name"]
    assert problems == []
    assert worker_processes(scratch) == []
    assert os.listdir(scratch) == []
    assert took < bound
