"""Runs the GPU check's steps (benchmarks/gpu_check.py) within a time budget, each in its own
log, and records what each did: one JSON line per step in ``results.jsonl`` as soon as it
ends (so a check cut off from outside still leaves the steps it finished), then a short table.

A step is a function of the :class:`Context`; it runs commands through :meth:`Context.run`,
which gives each command the step's remaining time and kills its whole process group when the
time is up (a launcher's ranks and a recipe's background stages included). A step that fails
or runs out of time is recorded and the check goes on with the steps that do not need it;
the check fails at the end, naming every step that did not pass.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Union

MIN_START = 15  # seconds: a step is not started with less time than this left
_WRITING = threading.Lock()  # steps side by side append to one results file


class StepFailed(Exception):
    """The step's own verdict: what went wrong, in a line."""


class StepTimeout(Exception):
    pass


@dataclass
class Step:
    name: str
    run: Callable[["Context"], Dict]  # returns the step's figures
    cap: float  # seconds at most
    needs: Sequence[str] = ()  # steps that must have passed first
    reserve: float = 0  # seconds of the budget kept for the steps after this one


@dataclass
class Context:
    out: str  # results, table and logs (what comes back from a GPU machine)
    work: str  # models and scratch files (large; never in out)
    deadline: float  # time.time() by which every step has ended
    env: Dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None  # where commands run (default: here)
    facts: Dict = field(default_factory=dict)  # what steps tell later steps
    local: threading.local = field(default_factory=threading.local)

    def run(self, command: Sequence[str], env: Optional[Dict[str, str]] = None,
            check: bool = True, cwd: Optional[str] = None) -> str:
        """Run ``command`` with its output appended to the step's log; return that output.
        Raises StepTimeout when the step's time runs out, StepFailed on a non-zero exit."""
        log_path, deadline = self.local.log, self.local.deadline
        remaining = deadline - time.time()
        if remaining <= 0:
            raise StepTimeout()
        start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(map(str, command))}\n")
            log.flush()
            process = subprocess.Popen([str(c) for c in command], stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, **self.env, **(env or {})},
                                       cwd=cwd or self.cwd, start_new_session=True)
            try:
                code = process.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                raise StepTimeout() from None
            finally:
                _kill_group(process)  # what the command left running in the background
        with open(log_path, errors="replace") as log:
            log.seek(start)
            output = log.read()
        if code != 0 and check:
            tail = " | ".join(line for line in output.strip().splitlines()[-3:])
            raise StepFailed(f"{os.path.basename(str(command[0]))} ... exited {code}: "
                             f"{tail[-300:]}")
        return output


def last_json(output: str) -> dict:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise StepFailed("no JSON line in the output")


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


Plan = Sequence[Union[Step, Sequence[Step]]]  # a list of steps is run side by side


def run_plan(plan: Plan, ctx: Context) -> List[Dict]:
    """Run every step in order (the steps of an inner list side by side); return the records."""
    os.makedirs(os.path.join(ctx.out, "logs"), exist_ok=True)
    records: List[Dict] = []
    for item in plan:
        group = list(item) if isinstance(item, (list, tuple)) else [item]
        threads = [threading.Thread(target=_run_step, args=(step, ctx, records))
                   for step in group]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return records


def _run_step(step: Step, ctx: Context, records: List[Dict]) -> None:
    passed = {r["step"] for r in records if r["status"] == "passed"}
    record: Dict = {"step": step.name}
    missing = [n for n in step.needs if n not in passed]
    left = ctx.deadline - step.reserve - time.time()
    if missing:
        record.update(status="skipped", error=f"needs {', '.join(missing)}, which did not pass")
    elif left < MIN_START:
        record.update(status="skipped", error=f"out of time ({max(0, left):.0f} s left)")
    else:
        ctx.local.log = os.path.join(ctx.out, "logs", f"{step.name}.log")
        ctx.local.deadline = time.time() + min(step.cap, left)
        print(f"[{time.strftime('%H:%M:%S')}] {step.name}: started "
              f"(at most {min(step.cap, left):.0f} s)", flush=True)
        start = time.time()
        try:
            record.update(status="passed", figures=step.run(ctx) or {})
        except StepTimeout:
            record.update(status="timeout",
                          error=f"still running after {time.time() - start:.0f} s: stopped")
        except StepFailed as err:
            record.update(status="failed", error=str(err))
        except Exception as err:  # a bug in the step itself: recorded, the check goes on
            with open(ctx.local.log, "a") as log:
                traceback.print_exc(file=log)
            record.update(status="failed", error=f"{type(err).__name__}: {err}")
        record["seconds"] = round(time.time() - start, 1)
        record["log"] = f"logs/{step.name}.log"
    with _WRITING:
        records.append(record)
        with open(os.path.join(ctx.out, "results.jsonl"), "a") as handle:
            handle.write(json.dumps(record) + "\n")
    said = f"in {record['seconds']} s" if "seconds" in record else ""
    print(f"[{time.strftime('%H:%M:%S')}] {step.name}: {record['status']} {said}"
          + (f": {record['error']}" if record.get("error") else "")
          + (f" {json.dumps(record['figures'])}" if record.get("figures") else ""), flush=True)


def table(records: List[Dict], describe: Callable[[Dict], str]) -> str:
    """A Markdown table of the steps: status, seconds and ``describe(figures)``."""
    lines = ["| step | status | seconds | figures |", "| --- | --- | --- | --- |"]
    for r in records:
        said = describe(r) if r.get("figures") else r.get("error", "")
        lines.append(f"| {r['step']} | {r['status']} | {r.get('seconds', '')} | "
                     f"{said.replace('|', '/')} |")
    return "\n".join(lines)
