#!/usr/bin/env python
"""Where the test suite's CPU time goes, test by test.

    python benchmarks/suite_cpu.py                        # the whole suite, top 25
    python benchmarks/suite_cpu.py --top 40 -- -m slow tests
    python benchmarks/suite_cpu.py -- -m "not slow" tests/grading

On a 2-core machine the suite is CPU-bound (two workers, every test's processes on one thread),
so its wall time is about its CPU time over two: a test's cost is the CPU it and its processes
use, not its own wall time (which includes waiting for the other worker's processes). This
runs pytest with the given arguments (default: ``tests``; the suite's own settings from
pyproject.toml apply, two workers included) and this file as a plugin in every worker: around
each test's setup, call and teardown it reads the worker's CPU time and that of the worker's
ended children (``getrusage``: the processes a test started and waited for, theirs included).
Then it prints the run's wall time, the CPU time of all the tests, each test's CPU and wall
seconds for the ``--top`` most expensive, and the tests' wall time not spent on CPU (waits:
timeouts, servers starting, a child not yet waited for). Records go to ``--out`` as JSON lines.

A server a test starts and leaves running (a module's fixture) counts toward the test that
ends it; CPU of processes nobody waits for (a daemon killed at exit) is not counted.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECORDS = "SWEET_RL_SUITE_CPU_RECORDS"


def _cpu() -> tuple:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


try:  # the plugin part (loaded by pytest in each worker with -p suite_cpu)
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        path = os.environ.get(RECORDS)
        own, children, wall = *_cpu(), time.time()
        yield
        if path:
            own_after, children_after = _cpu()
            record = {"test": item.nodeid, "own": round(own_after - own, 3),
                      "children": round(children_after - children, 3),
                      "wall": round(time.time() - wall, 3)}
            with open(path, "a", encoding="utf-8") as handle:  # short appends: one line each
                handle.write(json.dumps(record) + "\n")
except ImportError:  # pragma: no cover - pytest is what runs this
    pass


def summarize(records: list, wall: float, top: int) -> str:
    """The report: totals, then the ``top`` tests by CPU seconds."""
    cpu = sum(r["own"] + r["children"] for r in records)
    waits = sum(max(0.0, r["wall"] - r["own"] - r["children"]) for r in records)
    lines = [f"suite_cpu: {len(records)} tests in {wall:.1f} s wall; their CPU {cpu:.1f} s "
             f"({cpu / 60:.1f} CPU-minutes, {cpu / max(wall, 1e-9):.2f} cores on average); "
             f"wall not on CPU summed over tests {waits:.1f} s",
             "| CPU s | own s | children s | wall s | test |", "| --- | --- | --- | --- | --- |"]
    for r in sorted(records, key=lambda r: -(r["own"] + r["children"]))[:top]:
        lines.append(f"| {r['own'] + r['children']:.1f} | {r['own']:.1f} | {r['children']:.1f} "
                     f"| {r['wall']:.1f} | {r['test']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="tests listed (default 25)")
    parser.add_argument("--out", help="the records, JSON lines (default: a temporary file)")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="suite_cpu."), "tests.jsonl")
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, **{RECORDS: out})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
    start = time.time()
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu"]
                           + (args.pytest_args or ["tests"]), cwd=REPO, env=env)
    wall = time.time() - start
    records = []
    if os.path.exists(out):
        with open(out, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
    print(summarize(records, wall, args.top))
    print(f"suite_cpu: records in {out}; pytest exited {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
