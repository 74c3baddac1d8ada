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

from sweet_rl.grading.grader import RULES
from sweet_rl.grading.sandbox.sandbox_limits import TEST_OVERHEAD
from tests.grading.hostile_helpers import (PROJECT, SECRET, HostileWorld, make_scratch_root,
                                              worker_processes)

pytestmark = pytest.mark.slow  # a whole grading run of hostile answers

SCRIPT = os.path.join(PROJECT, "scripts", "evaluate_code.py")
TIMEOUT = 1.0  # --timeout: seconds per test, as the fixture's expected scores assume
WORKERS = 2  # --workers: grading threads, each with a sandbox worker of its own
# Beyond the per-test worst case: starting the interpreter and importing the grader, starting
# and warming up WORKERS workers, decoding and comparing outputs, reading and writing
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


def wall_bound(rows: list) -> float:
    """The longest the run may take. Per test, the worker's every wait has a deadline, which
    add up to the test's limit plus sandbox_limits.TEST_OVERHEAD (sandbox_worker's worst case
    per job: tests x (timeout + TEST_OVERHEAD)); answers are spread over WORKERS threads (a
    row's reference runs before its answer in the same worker; the fixture's references are
    one-line functions, within the margin):

        sum over rows of tests x (TIMEOUT + TEST_OVERHEAD) / WORKERS + MARGIN
    """
    per_test = TIMEOUT + TEST_OVERHEAD
    return sum(len(row["test_cases"]) for row in rows) * per_test / WORKERS + MARGIN


@pytest.fixture
def scratch():
    path = make_scratch_root()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_file_of_hostile_answers_is_graded_to_the_end_in_bounded_time(tmp_path, scratch,
                                                                       record_property):
    with HostileWorld(tmp_path) as world:
        rows = world.load()
        path = tmp_path / "hostile.jsonl"
        path.write_text("".join(json.dumps(trajectory(row)) + "\n" for row in rows))
        bound = wall_bound(rows)
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


# rows whose text, names or outputs once ended a run (lone surrogates) or stalled it, each with
# the honest answer graded right after it
TEXT_AND_STALLS = ("unencodable_names", "honest_after_unencodable_names", "large_reply",
                   "honest_after_large_reply", "fake_end_of_stream",
                   "honest_after_fake_end_of_stream", "reopen_job_channel",
                   "honest_after_reopen_job_channel")


@pytest.mark.parametrize("rules", RULES)
def test_every_row_is_written_under_either_rules_whatever_text_an_answer_makes(
        tmp_path, scratch, rules):
    with HostileWorld(tmp_path) as world:
        rows = [row for row in world.load() if row["name"] in TEXT_AND_STALLS]
        assert len(rows) == len(TEXT_AND_STALLS)
        path = tmp_path / "text.jsonl"
        path.write_text("".join(json.dumps(trajectory(row)) + "\n" for row in rows))
        env = dict(os.environ, TMPDIR=scratch)
        command = [sys.executable, SCRIPT, str(path), "--timeout", str(TIMEOUT),
                   "--memory_mb", "512", "--workers", str(WORKERS), "--grader", rules]
        done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True,
                              timeout=wall_bound(rows) + 120)
    assert done.returncode == 0, done.stderr[-4000:]
    raw = path.read_bytes()
    raw.decode("utf-8")  # strict: every row is valid UTF-8
    graded = [json.loads(line) for line in raw.splitlines() if line.strip()]
    assert [out["answer"] for out in graded] == [row["answer"] for row in rows]  # read back
    for row, out in zip(rows, graded):
        assert out["grader_rules"] == rules
        assert out["reward"] == row["expected"][rules], row["name"]
        assert out["grader_tests"] == row["verdicts"], row["name"]
    unencodable = graded[0]["test_results"][0]["got"]
    assert unencodable == "<opaque N\ud800>"
    assert worker_processes(scratch) == []
