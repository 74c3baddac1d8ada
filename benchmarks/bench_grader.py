"""Grader throughput: our sandboxed grader against an in-process, unsandboxed grader of the
same rules, on the real ColBench backend test tasks with the reference solutions as answers,
and on a variant where every tenth answer loops forever. One run, both graders, same machine.

    python benchmarks/bench_grader.py                       # ../shared/colbench/backend_test.jsonl
    python benchmarks/bench_grader.py --timeout 0.2 --workers 2

The in-process grader is what the original does: the word list on the whole answer,
``exec``/``eval`` in the grading process with a module's globals and a function's locals,
one task after another, a SIGALRM timer per test, ``expected == got`` compared in place. It
is only safe on trusted code and is here as the yardstick. Targets: at least 0.5x its speed
on plain answers, faster on loops.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sweet_rl.grading.code_extraction import extract_code, is_blocked  # noqa: E402
from sweet_rl.flags import Options, flag  # noqa: E402
from sweet_rl.grading.grader import Grader  # noqa: E402

DEFAULT_TASKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                             "colbench", "backend_test.jsonl")


class _TestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _TestTimeout()


# the names the published grader's module gives the code it runs (see sandbox_child)
_MODULE_GLOBALS = {"__name__": "sweet_rl.utils.code_utils", "signal": signal}


def _run_in_process(code: str, expression: str, timeout: float):
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        scope_globals = dict(_MODULE_GLOBALS)
        scope_locals = {"function_definition": code, "test_case": expression}
        exec(code, scope_globals, scope_locals)
        return eval(expression, scope_globals, scope_locals)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def grade_in_process(items, timeout: float):
    """The benchmark rules, unsandboxed: rewards per item. Runs in a throwaway folder, since
    some reference solutions create files (sqlite databases) in the working folder, with
    printing swallowed as the sandbox swallows it (some tests print: ``print(f(x)) == 10.0``)."""
    import contextlib
    import tempfile

    previous = signal.signal(signal.SIGALRM, _alarm)
    rewards = []
    here = os.getcwd()
    scratch = tempfile.TemporaryDirectory(prefix="bench_grader_")
    os.chdir(scratch.name)
    try:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            for answer, reference, tests in items:
                rewards.append(_grade_one_in_process(answer, reference, tests, timeout))
    finally:
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
        scratch.cleanup()
    return rewards


def _grade_one_in_process(answer, reference, tests, timeout: float) -> float:
    if is_blocked(answer):
        return 0.0
    code = extract_code(answer)
    passed = 0
    for expression in tests.values():
        try:
            expected = _run_in_process(reference, expression, 10 * timeout)
            got = _run_in_process(code, expression, timeout)
            passed += bool(expected == got and expected is not None)
        except BaseException:  # noqa: B036 - a grader must survive SystemExit too
            pass
    return passed / len(tests)


def looping(reference: str) -> str:
    """An answer with the reference's function name that never returns."""
    name = re.search(r"def\s+(\w+)", reference).group(1)
    return f"def {name}(*args, **kwargs):\n    while True:\n        pass\n"


@dataclass(kw_only=True)
class BenchOptions(Options):
    """Grade the tasks' references (and looping answers) sandboxed and in process."""

    POSITIONAL = ("tasks_path", "num_tasks", "timeout", "workers", "loop_every")
    tasks_path: str = flag("backend tasks (JSONL).", DEFAULT_TASKS)
    num_tasks: int = flag("the first this many tasks.", 1000)
    timeout: float = flag("seconds per test case.", 1.0)
    workers: int = flag("sandbox workers (0: one per core).", 0)
    loop_every: int = flag("every this-many-th answer never returns.", 10)


def bench(opts: BenchOptions) -> None:
    timeout, loop_every = opts.timeout, opts.loop_every
    with open(opts.tasks_path) as handle:
        tasks = [json.loads(line) for line in handle][:opts.num_tasks]
    workers = opts.workers or os.cpu_count() or 1
    plain = [(t["ground_truth"], t["ground_truth"], t["test_cases"]) for t in tasks]
    loops = [(looping(t["ground_truth"]) if i % loop_every == 0 else t["ground_truth"],
              t["ground_truth"], t["test_cases"]) for i, t in enumerate(tasks)]
    print(f"{len(tasks)} tasks, {timeout} s per test, sandbox workers: {workers}, "
          f"cores: {os.cpu_count()}")
    for name, items in (("plain answers", plain), (f"1 in {loop_every} answers loops", loops)):
        start = time.perf_counter()
        grader = Grader("benchmark", timeout=timeout, workers=workers)
        ours = [r.reward for r in grader.grade(items, progress=False)]
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        theirs = grade_in_process(items, timeout)
        theirs_s = time.perf_counter() - start
        agree = sum(a == b for a, b in zip(ours, theirs))
        print(f"{name}: sandboxed {len(items) / ours_s:.1f} tasks/s ({ours_s:.1f} s), "
              f"in-process {len(items) / theirs_s:.1f} tasks/s ({theirs_s:.1f} s), "
              f"ratio {theirs_s / ours_s:.2f}x, same reward on {agree}/{len(items)} tasks")
    print(f"sandbox isolation: {grader.isolation}")


if __name__ == "__main__":
    from sweet_rl.flags.command import run_stage

    run_stage(bench, BenchOptions)
