"""Running a recipe's independent stages side by side.

The miniature's model is so small that one stage cannot keep two cores busy: most of its time
is Python overhead and small matrix products, and every stage command first spends about 5 s
importing torch and transformers. So instead of one stage at a time with every core, a recipe
starts the steps that do not need each other's files at once (:meth:`Scheduler.start`, a
thread each), and each stage command (:meth:`Scheduler.stage`, a ``sweet-rl <stage>``
subprocess) waits for one of ``jobs`` slots, with ``threads`` torch threads. With ``preload``
the commands are forked from one process that has imported torch and transformers already
(:mod:`sweet_rl.recipes.mini.forkserver`) instead of starting a fresh interpreter each.

Results depend on ``threads`` (float sums are split differently), never on ``jobs`` or on the
order in which stages happen to run: every stage is seeded and reads only the files it names.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import sweet_rl
from sweet_rl.recipes.mini import forkserver


# the priority of the step this thread runs (a tuple: smaller goes first), read by every
# scheduler: a step started by one recipe's scheduler runs stages on another's
_PRIORITY = threading.local()


class Slots:
    """``count`` slots for stage commands, handed out by priority: when a slot frees, the
    waiting request with the smallest key goes first (the earliest among equal keys).

    A recipe's stages form chains of very different lengths (the first seed's chain carries
    the Best-of-N curve); served first come, first served, a long chain could start last and
    run alone at the end on one core. Serving the first seed (and, side by side, the longer
    family) first keeps every slot busy until the end. The order changes no number.
    """

    def __init__(self, count: int) -> None:
        self.free = count
        self.waiting: List[Tuple[Tuple[int, ...], int]] = []  # a heap of (key, arrival)
        self.arrivals = itertools.count()
        self.changed = threading.Condition()
        # (step, command, seconds) of every command run in a slot: where a run's time went
        self.spent: List[Tuple[str, str, float]] = []

    def acquire(self, blocking: bool = True, key: Tuple[int, ...] = ()) -> bool:
        with self.changed:
            ticket = (key, next(self.arrivals))
            if not blocking:
                if not self.free or (self.waiting and self.waiting[0] < ticket):
                    return False
                self.free -= 1
                return True
            heapq.heappush(self.waiting, ticket)
            while not (self.free and self.waiting[0] == ticket):
                self.changed.wait()
            heapq.heappop(self.waiting)
            self.free -= 1
            self.changed.notify_all()  # the next in line may take a slot still free
            return True

    def release(self) -> None:
        with self.changed:
            self.free += 1
            self.changed.notify_all()

    @contextlib.contextmanager
    def held(self, key: Tuple[int, ...] = ()) -> Iterator[None]:
        self.acquire(key=key)
        try:
            yield
        finally:
            self.release()


class StepFailed(RuntimeError):
    """A stage command exited non-zero, or a step started in the background failed."""


class Step:
    """A step running in the background: its name, its log, and how it ended."""

    def __init__(self, name: str, log: str) -> None:
        self.name, self.log = name, log
        self.error: Optional[BaseException] = None
        self.thread: Optional[threading.Thread] = None


class Scheduler:
    """At most ``jobs`` stage commands at once, each with ``threads`` torch threads; every
    background step's output in ``logs/<name>.log``; ``device`` (cpu, cuda or empty) for every
    stage."""

    def __init__(self, jobs: int, threads: int, logs: str, python: str = sys.executable,
                 device: str = "", slots: Optional[Slots] = None,
                 preload: bool = False) -> None:
        self.python, self.logs = python, logs
        # ``slots``: another scheduler's, so that two recipes side by side share one pool
        self.slots = slots if slots is not None else Slots(jobs)
        self.local = threading.local()  # the open log of the step this thread runs
        self.lock = threading.Lock()
        count = str(threads)
        self.env = dict(os.environ, OMP_NUM_THREADS=count, MKL_NUM_THREADS=count,
                        OPENBLAS_NUM_THREADS=count,
                        TOKENIZERS_PARALLELISM="false")  # the Rust tokenizer's threads compete
        # every stage imports the very package the recipe runs from
        root = os.path.dirname(os.path.dirname(os.path.abspath(sweet_rl.__file__)))
        self.env["PYTHONPATH"] = os.pathsep.join(
            [root] + [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p])
        # a GPU stage starts from a fresh interpreter: a forked copy would share the
        # server's CUDA state, were there any
        self.preload = preload and device != "cuda" and forkserver.supported()
        self.device_flag: List[str] = ["--device", device] if device else []
        if device == "cpu":  # the trainings have no --device: they take a visible GPU
            self.env["CUDA_VISIBLE_DEVICES"] = ""
        os.makedirs(logs, exist_ok=True)

    @classmethod
    def for_settings(cls, settings, logs: str,
                     slots: Optional[Slots] = None) -> "Scheduler":
        """The scheduler a recipe's settings ask for (JOBS, THREADS, PYTHON, DEVICE, PRELOAD);
        ``slots``: another scheduler's pool to share."""
        return cls(settings.slots(), settings.threads, logs, settings.python, settings.device,
                   slots, settings.preload)

    def say(self, text: str) -> None:
        """A line of the current step's log (the recipe's output outside any step)."""
        handle = getattr(self.local, "log", None)
        if handle is None:
            with self.lock:
                print(text, flush=True)
        else:
            handle.write(text + "\n")
            handle.flush()

    def announce(self, text: str) -> None:
        """A line of the recipe's own output, whichever step says it."""
        with self.lock:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def python_command(self, args: Sequence[str]) -> None:
        """``python ARGS`` once a slot is free (held until it ends); output to the step's log."""
        handle = getattr(self.local, "log", None)
        with self.slots.held(getattr(_PRIORITY, "key", ())):
            began = time.monotonic()
            if self.preload and args[0] == "-m":
                if handle:
                    handle.flush()
                server = forkserver.server_for(self.python, self.env)
                status = server.run(args, handle.fileno() if handle else None)
            else:
                status = subprocess.run([self.python, *args], env=self.env, stdout=handle,
                                        stderr=subprocess.STDOUT if handle else None).returncode
            seconds = time.monotonic() - began
        command = command_name(args)
        with self.slots.changed:
            self.slots.spent.append((getattr(self.local, "step", ""), command, seconds))
        if handle is not None:  # the step's log; the recipe's own output stays its tables
            handle.write(f"[{command}: {seconds:.1f} s in a slot]\n")
        if status:
            raise StepFailed(f"{' '.join(args[:4])} ... exited with {status}")

    def stage(self, name: str, *args: str) -> None:
        """The stage ``sweet-rl NAME ARGS``."""
        self.python_command(["-m", "sweet_rl.cli.main", name, *args])

    def mini(self, name: str, *args: str) -> None:
        """The miniature's command ``sweet-rl mini NAME ARGS``."""
        self.python_command(["-m", "sweet_rl.recipes.mini", name, *args])

    def start(self, name: str, function: Callable[..., Any], *args: Any,
              priority: Optional[int] = None) -> Step:
        """``function(*args)`` in the background, its output in ``logs/NAME.log``. Its stage
        commands (and its own steps') wait for a slot with this step's priority: ``priority``
        (smaller first) before the starting step's, or the starting step's alone."""
        step = Step(name, os.path.join(self.logs, f"{name}.log"))
        self.announce(f"start {name} (log: {step.log})")
        key = getattr(_PRIORITY, "key", ())
        if priority is not None:
            key = (priority, *key)

        def run() -> None:
            _PRIORITY.key = key
            with open(step.log, "w", buffering=1) as handle:
                self.local.log, self.local.step = handle, name
                try:
                    function(*args)
                except BaseException as err:  # noqa: BLE001 - finish reports it
                    step.error = err
                    handle.write(f"error: {err}\n")

        step.thread = threading.Thread(target=run, name=name, daemon=True)
        step.thread.start()
        return step

    def finish(self, *steps: Step) -> None:
        """Wait for every one of ``steps``; then, if any failed, name each and show the end
        of its log, and raise."""
        failed = []
        for step in steps:
            assert step.thread is not None
            step.thread.join()
            if step.error is None:
                self.announce(f"done  {step.name}")
            else:
                failed.append(step)
        for step in failed:
            with open(step.log, errors="replace") as handle:
                tail = handle.readlines()[-20:]
            print(f"---- {step.name} failed; the end of {step.log}:", file=sys.stderr)
            sys.stderr.write("".join(tail))
        if failed:
            raise StepFailed(f"failed: {', '.join(step.name for step in failed)}")


def command_name(args: Sequence[str]) -> str:
    """What a stage command is called in the time ledger: the stage (``sample``), the
    miniature's command (``mini warm_start``) or the module."""
    if len(args) >= 3 and args[0] == "-m":
        if args[1] == "sweet_rl.cli.main":
            return args[2]
        if args[1] == "sweet_rl.recipes.mini":
            return f"mini {args[2]}"
    if args and args[0] in ("-m", "-c"):
        return "python -c" if args[0] == "-c" else " ".join(args[1:2])
    return os.path.basename(args[0]) if args else "python"


def time_ledger(spent: Sequence[Tuple[str, str, float]], wall_seconds: float,
                slots: int) -> str:
    """Where a run's slot time went: minutes per command, the most first, then the sum
    against what ``slots`` slots held over the wall time (the rest: slots idle, or waiting
    for the next stage's files)."""
    totals: dict = {}
    for _step, command, seconds in spent:
        count, total = totals.get(command, (0, 0.0))
        totals[command] = (count + 1, total + seconds)
    busy = sum(total for _count, total in totals.values())
    held = max(wall_seconds * slots, 1e-9)
    lines = ["| command | runs | slot-minutes | share |", "| --- | --- | --- | --- |"]
    for command, (count, total) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {command} | {count} | {total / 60:.1f} | "
                     f"{100 * total / max(busy, 1e-9):.1f}% |")
    lines.append(f"\nslot-minutes in commands: {busy / 60:.1f} of {held / 60:.1f} "
                 f"({slots} slots x {wall_seconds / 60:.1f} min wall, "
                 f"{100 * busy / held:.1f}% busy)")
    return "\n".join(lines)
