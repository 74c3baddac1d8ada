"""benchmarks/bench_sandbox_job.py: CPU and page faults per sandboxed job, measured for real."""

import re
import subprocess
import sys

from tests.conftest import REPO_ROOT, colbench_file

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import bench_sandbox_job  # noqa: E402


def test_medians_and_descriptions_keep_unknown_shares_unknown():
    known = {"cpu_ms": 1.0, "faults": 300.0, "worker_ms": 0.2, "zygote_ms": 0.1,
             "zygote_faults": 60.0}
    unknown = dict(known, worker_ms=None, zygote_ms=None, zygote_faults=None)
    assert bench_sandbox_job.median_of([known, dict(known, cpu_ms=3.0), known])["cpu_ms"] == 1.0
    assert bench_sandbox_job.median_of([known, unknown])["zygote_ms"] is None
    assert bench_sandbox_job.describe(known) == (
        "1.000 ms CPU, 300 faults (worker 0.200 ms; zygote 0.100 ms, 60 faults)")
    assert bench_sandbox_job.describe(unknown) == "1.000 ms CPU, 300 faults"


def test_a_small_run_measures_every_kind_against_another_checkout():
    tasks = colbench_file("backend_test.jsonl")
    # the same checkout on both sides: the comparison's plumbing, with real workers
    result = subprocess.run([sys.executable, "benchmarks/bench_sandbox_job.py", str(tasks), "20",
                             "--rounds", "1", "--grader_root", str(REPO_ROOT)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    medians = [line for line in result.stdout.splitlines() if ", median of 1: " in line]
    assert [line.split(",")[0] for line in medians] == ["trivial", "tasks", "warm tasks",
                                                         "bare fork"]
    cpu = {}
    for line in medians:
        kind = line.split(",")[0]
        cpu[kind] = [float(value) for value in re.findall(r"([\d.]+) ms CPU", line)]
        faults = [int(value) for value in re.findall(r"(\d+) faults", line)]
        assert len(cpu[kind]) == 2 and all(value > 0 for value in cpu[kind]), line
        # the warm harness runs in one process, where nothing is fresh to fault in
        assert len(faults) >= 2 and (kind == "warm tasks" or all(faults)), line
        assert re.search(r"CPU this/other [\d.]+x$", line), line
    # a sandboxed job costs more than the bare fork under it and than the same jobs run warm,
    # and the worker and its zygote are found and measured
    trivial, tasks_line = medians[:2]
    assert cpu["trivial"][0] > cpu["bare fork"][0]
    assert cpu["tasks"][0] > cpu["warm tasks"][0]
    assert "(worker " in trivial and "zygote " in tasks_line


def test_an_older_harness_is_named_not_measured():
    """A checkout whose harness cannot run a job outside a child gets words, no figures."""
    assert bench_sandbox_job.describe({key: None for key in bench_sandbox_job.KEYS}) == (
        "not measurable (that checkout's harness runs a job only in a child)")
    assert bench_sandbox_job.median_of([{key: None for key in bench_sandbox_job.KEYS}])[
        "cpu_ms"] is None


def test_bad_counts_are_refused():
    result = subprocess.run([sys.executable, "benchmarks/bench_sandbox_job.py", "--jobs", "0"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "at least 1" in result.stderr
