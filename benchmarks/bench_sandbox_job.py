"""What one sandboxed job costs: CPU time and page faults per job through one sandbox worker.

    python benchmarks/bench_sandbox_job.py                          # this checkout
    python benchmarks/bench_sandbox_job.py --grader_root ../old     # against another one

Four measurements, each in a fresh process, each round alternating this checkout and
``--grader_root``'s (when given); the figures are the medians over the rounds:

- ``trivial``: a one-line function and one test, ``--jobs`` times: what every job pays (the
  worker's bookkeeping, the zygote's fork, the child's set-up, compile and exit);
- ``tasks``: the real ColBench backend tasks' reference solutions, graded as answers are (one
  test at a time), one job per task;
- ``warm tasks``: the same jobs through the children's own harness (the job channel, the
  tests, the records) in one warmed-up process, with no worker, no fork and no bounds, after
  one untimed pass over them: what the harness and the tests' own work cost once nothing is
  fresh (the in-process grader's condition). Against ``tasks``, it splits a job into its work
  and what running it in a fresh process adds;
- ``bare fork``: a process holding what a zygote holds (the worker's modules, warmed up the
  same way) forking ``--jobs`` children that exit at once: the floor under every job. A graded
  task runs two jobs, its reference's and its answer's, each in a fresh child.

CPU time is that of the worker's whole process tree (the worker, its zygote and the
children), counted once the worker is closed, less that of a worker started and closed with
no job; faults are minor page faults, of the tree and of the zygote alone (read from
``/proc``). The grader benchmark (``bench_grader.py``) measures the same costs end to end.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from sweet_rl.flags import Options, flag  # noqa: E402

DEFAULT_TASKS = os.path.join(REPO, "..", "shared", "colbench", "backend_test.jsonl")


@dataclass(kw_only=True)
class JobBenchOptions(Options):
    """Measure what one sandboxed job costs (CPU and page faults)."""

    POSITIONAL = ("tasks_path", "jobs")
    tasks_path: str = flag("backend tasks (JSONL) for the 'tasks' measurement.", DEFAULT_TASKS)
    jobs: int = flag("jobs per measurement (tasks: at most the file's).", 2000)
    rounds: int = flag("rounds, each measuring every kind once per checkout.", 3)
    grader_root: str = flag("another checkout to measure the same way (empty: none).", "")


# one measurement in a fresh interpreter: one JSON line
_SANDBOXED = r"""
import json, os, resource, sys
root, kind, jobs, tasks_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)
import sweet_rl
from sweet_rl.grading.sandbox.client import SandboxWorker

def tree():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt

TICK = os.sysconf("SC_CLK_TCK")

def fields(pid):  # /proc/<pid>/stat after the command name (None: not found)
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None

def stat(pid):  # (CPU seconds, minor faults) of a running process (None: not found)
    found = fields(pid)
    return None if found is None else ((int(found[11]) + int(found[12])) / TICK, int(found[7]))

def zygote_of(worker_pid):  # the worker's one child is its zygote
    return next((name for name in os.listdir("/proc")
                 if (fields(name) or [None, None])[1] == str(worker_pid)), None)

if kind == "trivial":
    jobs = [("def f():\n    return 1\n", ["f()"])] * jobs
else:
    with open(tasks_path) as handle:
        tasks = [json.loads(line) for line in handle][:jobs]
    jobs = [(t["ground_truth"], list(t["test_cases"].values())) for t in tasks]
cpu0, faults0 = tree()
SandboxWorker(0).close()  # what starting and closing a worker costs, taken off below
cpu1, faults1 = tree()
worker = SandboxWorker(0)
pids = {"worker": worker.process.pid, "zygote": zygote_of(worker.process.pid)}
before = {name: stat(pid) for name, pid in pids.items()}
for code, tests in jobs:
    worker.run(code, tests, "benchmark", 1.0, 2048)
after = {name: stat(pid) for name, pid in pids.items()}
worker.close()
cpu2, faults2 = tree()
count = len(jobs)
spent = {name: None if None in (before[name], after[name]) else
         [(end - start) / count for start, end in zip(before[name], after[name])]
         for name in pids}
print(json.dumps({
    "cpu_ms": 1e3 * ((cpu2 - cpu1) - (cpu1 - cpu0)) / count,
    "faults": ((faults2 - faults1) - (faults1 - faults0)) / count,
    "worker_ms": None if spent["worker"] is None else 1e3 * spent["worker"][0],
    "zygote_ms": None if spent["zygote"] is None else 1e3 * spent["zygote"][0],
    "zygote_faults": None if spent["zygote"] is None else spent["zygote"][1],
    "package": sweet_rl.__file__}))
"""

# the floor: forks of a process like the zygote, children that exit at once
_BARE_FORK = r"""
import gc, json, os, resource, sys
root, jobs = sys.argv[1], int(sys.argv[2])
sandbox = os.path.join(root, "sweet_rl", "grading", "sandbox")
sys.path.insert(0, sandbox)
import sandbox_worker, sandbox_child  # the worker takes its folder off sys.path itself
sandbox_child.warm_up(os.open(os.devnull, os.O_WRONLY))
gc.collect()
gc.freeze()
def cpu():
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
            own.ru_minflt + children.ru_minflt)
cpu0, faults0 = cpu()
for _ in range(jobs):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
cpu1, faults1 = cpu()
print(json.dumps({"cpu_ms": 1e3 * (cpu1 - cpu0) / jobs, "faults": (faults1 - faults0) / jobs,
                  "package": sandbox_worker.__file__}))
"""


# the work under a job: the children's harness run warm in one process (no fork, no bounds)
_WARM = r"""
import inspect, json, os, resource, sys, tempfile
root, jobs, tasks_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, os.path.join(root, "sweet_rl", "grading", "sandbox"))
import sandbox_child as harness
serve = getattr(harness, "serve", None)
if serve is None or "out" not in inspect.signature(serve).parameters:  # an older harness
    print(json.dumps({"cpu_ms": None, "package": harness.__file__}))  # cannot run it here
    raise SystemExit(0)
with open(tasks_path) as handle:
    tasks = [json.loads(line) for line in handle][:jobs]
jobs = [harness.job_header({"code": t["ground_truth"], "count": len(t["test_cases"]),
                            "start": 0, "rules": "benchmark", "timeout": 1.0,
                            "memory_mb": 0, "nonce": "0" * harness.NONCE_LENGTH})
        + b"".join(map(harness.text_line, t["test_cases"].values())) for t in tasks]
sink = os.open(os.devnull, os.O_WRONLY)
harness.warm_up(sink)
os.chdir(tempfile.mkdtemp(prefix="bench_sandbox_job_"))  # some references write files
job_file = tempfile.TemporaryFile()
screen, screen_fd = sys.stdout, os.dup(1)
sys.stdout = open(os.devnull, "w")  # some tests print
os.dup2(sink, 1)

def run_all():
    for data in jobs:
        job_file.seek(0)
        job_file.truncate()
        job_file.write(data)
        job_file.flush()
        job_file.seek(0)
        channel = harness.JobChannel(job_file.fileno())
        harness.serve(harness.parse_job(channel.line(), channel.line()), channel,
                      lambda job: None, out=sink)

def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, own.ru_minflt

run_all()  # imports, caches and adapted bytecode, as a long-lived grader has them
cpu0, faults0 = cpu()
run_all()
cpu1, faults1 = cpu()
os.dup2(screen_fd, 1)
sys.stdout = screen
print(json.dumps({"cpu_ms": 1e3 * (cpu1 - cpu0) / len(jobs),
                  "faults": (faults1 - faults0) / len(jobs), "package": harness.__file__}))
"""


def measure(kind: str, root: str, opts: JobBenchOptions) -> dict:
    """One measurement of ``kind`` with ``root``'s sandbox, in a fresh interpreter."""
    if kind == "bare fork":
        command = [sys.executable, "-S", "-c", _BARE_FORK, root, str(opts.jobs)]
    elif kind == "warm tasks":
        command = [sys.executable, "-c", _WARM, root, str(opts.jobs), opts.tasks_path]
    else:
        command = [sys.executable, "-c", _SANDBOXED, root, kind, str(opts.jobs),
                   opts.tasks_path]
    found = subprocess.run(command, capture_output=True, text=True)
    if found.returncode:
        raise SystemExit(f"bench_sandbox_job: {kind} with {root} failed:\n"
                         f"{found.stderr[-3000:]}")
    result = json.loads(found.stdout.strip().splitlines()[-1])
    package = os.path.realpath(result["package"])
    if not package.startswith(os.path.realpath(root) + os.sep):  # the checkout asked for
        raise SystemExit(f"bench_sandbox_job: the sandbox came from {package}, not {root}")
    return result


def describe(figures: dict) -> str:
    """One measurement in words: the tree's CPU and faults per job, and where known the
    worker's and the zygote's shares (the rest is the children's)."""
    if figures.get("cpu_ms") is None:
        return "not measurable (that checkout's harness runs a job only in a child)"
    text = f"{figures['cpu_ms']:.3f} ms CPU, {figures['faults']:.0f} faults"
    if figures.get("worker_ms") is not None and figures.get("zygote_ms") is not None:
        text += (f" (worker {figures['worker_ms']:.3f} ms; zygote {figures['zygote_ms']:.3f}"
                 f" ms, {figures['zygote_faults']:.0f} faults)")
    return text


KEYS = ("cpu_ms", "faults", "worker_ms", "zygote_ms", "zygote_faults")


def median_of(results: list) -> dict:
    """Each figure's median over ``results``; None where a result lacks it (not measured)."""
    return {key: (None if any(r.get(key) is None for r in results)
                  else statistics.median(r[key] for r in results)) for key in KEYS}


def bench(opts: JobBenchOptions) -> None:
    if opts.jobs < 1 or opts.rounds < 1:
        raise SystemExit("bench_sandbox_job: --jobs and --rounds must be at least 1")
    roots = {"this": REPO}
    if opts.grader_root:
        roots["other"] = os.path.abspath(opts.grader_root)
    print(f"{opts.jobs} jobs per measurement, {opts.rounds} rounds, cores: {os.cpu_count()}; "
          + ", ".join(f"{name}: {root}" for name, root in roots.items()))
    kinds = ("trivial", "tasks", "warm tasks", "bare fork")
    results = {(kind, name): [] for kind in kinds for name in roots}
    for round_number in range(1, opts.rounds + 1):
        for kind in kinds:
            for name, root in roots.items():
                found = measure(kind, root, opts)
                results[kind, name].append(found)
                print(f"round {round_number}, {kind}, {name}: {describe(found)}", flush=True)
    for kind in kinds:
        medians = {name: median_of(results[kind, name]) for name in roots}
        line = f"{kind}, median of {opts.rounds}: " + "; ".join(
            f"{name} {describe(medians[name])}" for name in roots)
        if "other" in medians and None not in (medians["this"]["cpu_ms"],
                                               medians["other"]["cpu_ms"]):
            ratio = medians["this"]["cpu_ms"] / medians["other"]["cpu_ms"]
            line += f"; CPU this/other {ratio:.2f}x"
        print(line)


if __name__ == "__main__":
    from sweet_rl.flags.command import run_stage

    run_stage(bench, JobBenchOptions)
