"""Grading-process side of the sandbox: a long-lived worker process and its restart logic.

A :class:`SandboxWorker` owns one ``sandbox_worker.py`` process (see that module for what
happens inside). It is started with a scrubbed environment, in a session of its own, with a
scratch folder that is removed on :meth:`close`. Every read from and write to the worker
has a deadline (the job's own worst case plus a margin): a worker that dies or stalls (it
should not: untrusted code only runs in its children, which can send it no signal) is killed
and replaced, and the job is tried once more on the fresh one, then reported as crashed, so
no answer can stop or hang a grading run. What each start of the worker had of its
confinement is kept (:attr:`SandboxWorker.weakest`, :attr:`SandboxWorker.lost`), so a layer a
restart came up without is never lost silently.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from sweet_rl.grading.sandbox import sandbox_memory
from sweet_rl.grading.sandbox.sandbox_limits import job_bound

logger = logging.getLogger(__name__)

WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_worker.py")
# what the worker (and so every sandboxed child) sees of the environment: nothing of ours.
# LD_BIND_NOW: the dynamic linker binds every symbol when a library loads, in the worker,
# instead of on first call in each child (each such binding writes, so copies, a page: about
# 12 of a child's 340 page faults)
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
              "LD_BIND_NOW": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


def library_folders() -> List[str]:
    """This interpreter's site-packages folders, for answers that import third-party packages.

    The worker starts with ``python -S``: ``site`` would run every ``.pth`` file of the
    installation, and those import whatever their packages like (an editable install's finder
    pulls in pathlib, zipfile, tempfile, random and threading). All of that would sit in the
    worker's memory, and an answer's fork costs in proportion to that memory; ``threading``
    and ``random`` even run Python code in every forked child. Measured here: a bare fork of
    a plain interpreter took 0.47 ms without ``site`` and 1.09 ms with it. The folders are put
    on the worker's ``sys.path`` as they are, without their ``.pth`` files.
    """
    import site

    return [folder for folder in site.getsitepackages() if os.path.isdir(folder)]


class SandboxError(RuntimeError):
    pass


# what a reply may take beyond the job's own worst case (see sandbox_worker): starting up,
# a busy machine
REPLY_MARGIN = 30.0
START_LIMIT = 120.0  # seconds a fresh worker may take to confine itself and warm up
_STARTS = itertools.count()  # every worker start in this process gets a cgroup of its own


def job_deadline(tests: int, timeout: float) -> float:
    """Seconds a worker may take to answer a job of ``tests`` tests: every test may time out
    and need a fresh child (sandbox_limits.job_bound), plus a margin."""
    return job_bound(tests, timeout) + REPLY_MARGIN


def weakest(first: Dict[str, object], other: Dict[str, object]) -> Dict[str, object]:
    """The isolation two worker starts both had: a layer counts only where both had it (the
    lower Landlock ABI; a missing layer's own value, e.g. ``memory_cgroup: False``)."""
    merged = dict(first)
    for key, value in other.items():
        if key not in merged:
            merged[key] = value
        elif key == "landlock_abi":
            merged[key] = min(merged[key], value)
        elif not value:
            merged[key] = value
    return merged


def lost_layers(first: Dict[str, object], later: Dict[str, object]) -> List[str]:
    """The layers ``first`` had that ``later`` lacks (or has at a lower Landlock ABI)."""
    return sorted(key for key, value in first.items()
                  if value and (not later.get(key) or (key == "landlock_abi"
                                                       and later[key] < value)))


def remove_scratch(path: str) -> None:
    """Remove a worker's scratch folder whatever an answer left in it (never raises)."""
    from sweet_rl.grading.sandbox.sandbox_cleanup import remove_tree

    try:
        left = remove_tree(path, keep_root=False)
    except Exception as error:  # noqa: BLE001 - cleanup must never end a grading run
        logger.warning("could not remove the sandbox folder %s: %s", path, error)
        return
    if left:
        logger.warning("%d entries of the sandbox folder %s could not be removed", left, path)


def close_all(workers: List["SandboxWorker"]) -> None:
    """Close ``workers``, each told to end before any is waited for (they wind down side by
    side); never raises for one that failed to close."""
    for worker in workers:
        worker.end_input()
    for worker in workers:
        try:
            worker.close()
        except Exception as error:  # noqa: BLE001 - the others must still be closed
            logger.warning("sandbox worker %d did not close cleanly: %s", worker.slot, error)


class SandboxWorker:
    """One worker process. Not thread-safe: give each thread its own."""

    def __init__(self, slot: int, scratch_root: Optional[str] = None, memory_mb: int = 2048,
                 wait: bool = True, rules: Optional[str] = None):
        self.slot = slot
        # the rule set its jobs will mostly use: the worker measures which pages to pin
        # under it (see sandbox_pinning); jobs under any rule set run all the same
        self.rules = rules
        self.scratch_root = scratch_root
        self.memory_mb = memory_mb  # the children's memory cgroup's bound (see sandbox_memory)
        self.process: Optional[subprocess.Popen] = None
        self.scratch: Optional[str] = None
        self.cgroup: Optional[str] = None
        self.isolation: Dict[str, object] = {}  # the running worker's
        # what every start of this worker had, and the layers a restart came up without
        self.weakest: Dict[str, object] = {}
        self.lost: List[str] = []
        self.refused = 0  # result packets refused (written by answers, not by the sandbox)
        self.pinned_pages = 0  # pages its fork server copies into each child at the fork
        self.huge_code_mib = 0  # the interpreter's code it shares with children in huge pages
        self._pending: Optional[tuple] = None
        self._spawn()
        if wait:
            self.ready()

    def _start(self) -> None:
        self._spawn()
        self.ready()

    def _spawn(self) -> None:
        """Start the worker process; :meth:`ready` waits for its greeting."""
        self.scratch = tempfile.mkdtemp(
            prefix=f"sweet_rl_sandbox{self.slot}_", dir=self.scratch_root
        )
        os.chmod(self.scratch, 0o700)
        env = dict(WORKER_ENV, HOME=self.scratch, TMPDIR=self.scratch)
        command = [
            sys.executable,
            "-S",
            WORKER_PATH,
            "--slot",
            str(self.slot),
            "--scratch",
            self.scratch,
        ]
        # a name never used before in this process: a child of the last worker that
        # outlived it would still hold the last one
        self.cgroup, why_not = sandbox_memory.create(f"{self.slot}_{next(_STARTS)}",
                                                     self.memory_mb)
        if self.cgroup:
            command += ["--cgroup", self.cgroup]
        else:
            logger.debug("sandbox worker %d: no memory cgroup (%s)", self.slot, why_not)
        if self.rules:
            command += ["--rules", self.rules]
        for folder in library_folders():
            command += ["--library", folder]
        self.process = subprocess.Popen(
            # not -I: it would ignore PYTHONHASHSEED, and every worker must iterate sets in the
            # same order (a reference and its answer run in different workers); the
            # environment is ours entirely. -S: no site module, see library_folders
            command,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            cwd=self.scratch, start_new_session=True, bufsize=0)
        os.set_blocking(self.process.stdin.fileno(), False)  # every write has a deadline
        self._buffer = []  # what was read of the next line, in pieces (none holds a newline)
        self._command = command
        self._greeted = False

    def ready(self) -> "SandboxWorker":
        """Wait for the started worker's greeting (its isolation); raises SandboxError when
        it did not come. Workers started with ``wait=False`` confine and warm themselves up
        side by side, each on its own CPU time, until this is called."""
        if self._greeted:
            return self
        self._greeted = True
        command = self._command
        hello = self._read_line(START_LIMIT)
        try:
            greeting = json.loads(hello) if hello else {}
        except ValueError:
            greeting = {}
        if "isolation" not in greeting:
            self.close()
            why = greeting.get("error") or f"it did not start ({' '.join(command)})"
            raise SandboxError(f"sandbox worker: {why}")
        self.isolation = greeting["isolation"]
        self.pinned_pages = int(greeting.get("pinned_pages") or 0)
        self.huge_code_mib = int(greeting.get("huge_code_mib") or 0)
        if self.weakest:
            lost = lost_layers(self.weakest, self.isolation)
            if lost:
                logger.warning("sandbox worker %d restarted without %s", self.slot,
                               ", ".join(lost))
            self.lost = sorted(set(self.lost) | set(lost))
            self.weakest = weakest(self.weakest, self.isolation)
        else:
            self.weakest = dict(self.isolation)
        return self

    def run(self, code: str, tests: List[str], rules: str, timeout: float,
            memory_mb: int, reference: bool = False) -> List[List[str]]:
        """``[[status, detail], ...]`` per test; status ``ok`` carries the encoded value.

        ``reference``: a reference solution's job. Its child gets every test at once, not
        each when the one before it is done (fewer round trips: code that could use that to
        race its clock changes only its own outputs). Every job runs in fresh children either
        way.
        """
        self.submit(code, tests, rules, timeout, memory_mb, reference)
        return self.collect()

    def submit(self, code: str, tests: List[str], rules: str, timeout: float,
               memory_mb: int, reference: bool = False) -> None:
        """Send a job without waiting, so the caller can do other work; then :meth:`collect`."""
        self.ready()
        job = json.dumps({"code": code, "tests": tests, "rules": rules, "timeout": timeout,
                          "memory_mb": memory_mb, "reference": reference})
        seconds = job_deadline(len(tests), timeout)
        self._pending = (job, len(tests), seconds)
        self._send(job, seconds)

    def collect(self) -> List[List[str]]:
        """The results of the job sent by :meth:`submit`; a dead worker is restarted and the
        job tried once more on the fresh one, then reported as crashed."""
        job, count, seconds = self._pending
        self._pending = None
        for attempt in range(2):
            reply = self._receive(seconds)
            if reply is not None:
                return reply
            logger.warning("sandbox worker %d died or stalled (attempt %d); restarting it",
                           self.slot, attempt + 1)
            self.close()
            self._start()
            if attempt == 0:
                self._send(job, seconds)
        return [["crash", "sandbox worker died"] for _ in range(count)]

    def _send(self, job: str, seconds: float) -> None:
        """The job to the worker within ``seconds`` (a worker that does not read it in time
        is seen as a missing reply by :meth:`_receive`)."""
        data = memoryview((job + "\n").encode())
        deadline = time.monotonic() + seconds
        fd = self.process.stdin.fileno()
        while data:
            try:
                data = data[os.write(fd, data):]
                continue
            except BlockingIOError:
                pass
            except OSError:  # it is gone
                return
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                return

    def _read_line(self, seconds: float) -> Optional[bytes]:
        """One line from the worker within ``seconds``, or None (ended, or too late). Each
        piece read is searched for the newline once and kept apart until the line is whole,
        so a line of n bytes costs time in proportion to n."""
        deadline = time.monotonic() + seconds
        fd = self.process.stdout.fileno()
        pieces = self._buffer
        while True:
            if pieces:
                last = pieces[-1]
                end = last.find(b"\n")
                if end >= 0:
                    line = b"".join(pieces[:-1]) + last[:end]
                    rest = last[end + 1:]
                    self._buffer = [rest] if rest else []  # the next line's start
                    return line
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:
                return None
            if not chunk:
                return None
            pieces.append(chunk)

    def _receive(self, seconds: float) -> Optional[List[List[str]]]:
        line = self._read_line(seconds)
        try:
            reply = json.loads(line) if line else None
            if reply is None:
                return None
            self.refused += int(reply.get("refused", 0))
            return reply["results"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def end_input(self) -> None:
        """Tell the worker to end (end of its input: it kills its children and exits)
        without waiting for it: :meth:`close` then waits. Closing several workers, end the
        input of each first, so they wind down side by side."""
        if self.process is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass

    def close(self) -> None:
        if self.process is not None:
            self.end_input()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                pass
            self.process.wait()
            try:
                self.process.stdout.close()
            except OSError:
                pass
            self.process = None
        if self.cgroup:
            # whatever is left in it (nothing should be) is killed first: no process of a
            # sandbox outlives it, and the cgroup can go
            sandbox_memory.kill_all(self.cgroup)
            if not sandbox_memory.remove(self.cgroup):
                logger.warning("could not remove the sandbox's memory cgroup %s", self.cgroup)
            self.cgroup = None
        if self.scratch:
            remove_scratch(self.scratch)
            self.scratch = None

    def __enter__(self) -> "SandboxWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
