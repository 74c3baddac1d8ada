"""Grader throughput: our sandboxed grader against an in-process, unsandboxed grader of the
same rules, on the real ColBench backend test tasks with the reference solutions as answers,
and on a variant where every tenth answer loops forever. One run, both graders, same machine.

    python benchmarks/bench_grader.py                       # ../shared/colbench/backend_test.jsonl
    python benchmarks/bench_grader.py --timeout 0.2 --workers 2 --rounds 5
    python benchmarks/bench_grader.py --timeout 0.2 --grader_root ../old   # another checkout's

The in-process grader is what the original does: the word list on the whole answer,
``exec``/``eval`` in the grading process with a module's globals and a function's locals,
one task after another, a SIGALRM timer per test, ``expected == got`` compared in place. It
is only safe on trusted code and is here as the yardstick. Targets: at least 0.5x its speed
on plain answers, faster on loops.

Each round grades every variant once with each grader, alternating, each run in a fresh
process (the in-process grader keeps what the references import and allocate, and its speed
swings by a fifth from one run to the next in one process); the medians over the rounds and
the median of the rounds' ratios are the figures. ``--grader_root`` grades the sandboxed side
with another checkout's grader (a ``git worktree`` of an older commit, say), the rest the same.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import sys
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from sweet_rl.grading.code_extraction import extract_code, is_blocked  # noqa: E402
from sweet_rl.flags import Options, flag  # noqa: E402

DEFAULT_TASKS = os.path.join(REPO, "..", "shared", "colbench", "backend_test.jsonl")


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
    rounds: int = flag("rounds, each grading every variant once with each grader.", 3)
    grader_root: str = flag("the checkout whose sandboxed grader runs (empty: this one).", "")


# one side of one round, in a fresh interpreter: rewards and seconds as one JSON line
_SIDE = """
import json, sys, time
side, root, items_path, timeout, workers = sys.argv[1:6]
items = json.load(open(items_path))
if side == "sandboxed":
    sys.path.insert(0, root)
    import sweet_rl
    from sweet_rl.grading.grader import Grader
    start = time.perf_counter()
    grader = Grader("benchmark", timeout=float(timeout), workers=int(workers))
    rewards = [r.reward for r in grader.grade(items, progress=False)]
    seconds = time.perf_counter() - start
    extra = {"isolation": grader.isolation, "package": sweet_rl.__file__,
             "pinned_pages": getattr(grader, "pinned_pages", None),
             "huge_code_mib": getattr(grader, "huge_code_mib", None)}
else:
    sys.path.insert(0, root + "/benchmarks")
    from bench_grader import grade_in_process
    start = time.perf_counter()
    rewards = grade_in_process(items, float(timeout))
    seconds = time.perf_counter() - start
    extra = {}
print(json.dumps(dict(rewards=rewards, seconds=seconds, **extra)))
"""


def _side(side: str, root: str, items_path: str, opts: BenchOptions, workers: int) -> dict:
    import subprocess

    found = subprocess.run([sys.executable, "-c", _SIDE, side, root, items_path,
                            str(opts.timeout), str(workers)], capture_output=True, text=True)
    if found.returncode:
        raise SystemExit(f"bench_grader: the {side} grader failed:\n{found.stderr[-3000:]}")
    result = json.loads(found.stdout.strip().splitlines()[-1])
    if side == "sandboxed":  # the package imported must be the one asked for
        package = os.path.realpath(result["package"])
        if not package.startswith(os.path.realpath(root) + os.sep):
            raise SystemExit(f"bench_grader: sweet_rl came from {package}, not {root}")
    return result


def bench(opts: BenchOptions) -> None:
    import tempfile

    loop_every = opts.loop_every
    with open(opts.tasks_path) as handle:
        tasks = [json.loads(line) for line in handle][:opts.num_tasks]
    workers = opts.workers or os.cpu_count() or 1
    plain = [(t["ground_truth"], t["ground_truth"], t["test_cases"]) for t in tasks]
    loops = [(looping(t["ground_truth"]) if i % loop_every == 0 else t["ground_truth"],
              t["ground_truth"], t["test_cases"]) for i, t in enumerate(tasks)]
    root = os.path.abspath(opts.grader_root or REPO)
    print(f"{len(tasks)} tasks, {opts.timeout} s per test, sandbox workers: {workers}, "
          f"cores: {os.cpu_count()}, rounds: {opts.rounds}, sandboxed grader from {root}")
    variants = (("plain answers", plain), (f"1 in {loop_every} answers loops", loops))
    speeds = {name: {"sandboxed": [], "in-process": [], "ratio": []} for name, _ in variants}
    with tempfile.TemporaryDirectory(prefix="bench_grader_items_") as scratch:
        paths = {}  # each variant's items, written once for every run that grades them
        for number, (name, items) in enumerate(variants):
            paths[name] = os.path.join(scratch, f"items{number}.json")
            with open(paths[name], "w") as handle:
                json.dump(items, handle)
        for round_number in range(1, opts.rounds + 1):
            for name, items in variants:
                ours = _side("sandboxed", root, paths[name], opts, workers)
                theirs = _side("in-process", REPO, paths[name], opts, workers)
                agree = sum(a == b for a, b in zip(ours["rewards"], theirs["rewards"]))
                found = speeds[name]
                found["sandboxed"].append(len(items) / ours["seconds"])
                found["in-process"].append(len(items) / theirs["seconds"])
                found["ratio"].append(theirs["seconds"] / ours["seconds"])
                print(f"round {round_number}, {name}: sandboxed {found['sandboxed'][-1]:.1f} "
                      f"tasks/s ({ours['seconds']:.1f} s), in-process "
                      f"{found['in-process'][-1]:.1f} tasks/s ({theirs['seconds']:.1f} s), "
                      f"ratio {found['ratio'][-1]:.2f}x, same reward on "
                      f"{agree}/{len(items)} tasks", flush=True)
    for name, found in speeds.items():
        median = {key: statistics.median(values) for key, values in found.items()}
        print(f"{name}, median of {opts.rounds}: sandboxed {median['sandboxed']:.1f} "
              f"tasks/s, in-process {median['in-process']:.1f} tasks/s, ratio "
              f"{median['ratio']:.2f}x (rounds: "
              f"{', '.join(f'{r:.2f}' for r in found['ratio'])})")
    print(f"sandbox isolation: {ours['isolation']}")
    print(f"pages each fork server copies into a child at the fork, per worker: "
          f"{ours.get('pinned_pages')}")
    print(f"MiB of the interpreter's code the children share in huge pages, per worker: "
          f"{ours.get('huge_code_mib')}")


if __name__ == "__main__":
    from sweet_rl.flags.command import run_stage

    run_stage(bench, BenchOptions)
