"""Grading-process side of the sandbox: a long-lived worker process and its restart logic.

A :class:`SandboxWorker` owns one ``sandbox_worker.py`` process (see that module for what
happens inside). It is started with a scrubbed environment, in a session of its own, with a
scratch folder that is removed on :meth:`close`. If the worker itself dies (it should not:
untrusted code only runs in its children) the job is retried once on a fresh worker, then
reported as crashed, so no answer can stop a grading run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

logger = logging.getLogger(__name__)

WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_worker.py")
# what the worker (and so every sandboxed child) sees of the environment: nothing of ours
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
              "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


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


class SandboxWorker:
    """One worker process. Not thread-safe: give each thread its own."""

    def __init__(self, slot: int, scratch_root: Optional[str] = None):
        self.slot = slot
        self.scratch_root = scratch_root
        self.process: Optional[subprocess.Popen] = None
        self.scratch: Optional[str] = None
        self.isolation: Dict[str, object] = {}
        self._pending: Optional[tuple] = None
        self._start()

    def _start(self) -> None:
        self.scratch = tempfile.mkdtemp(prefix=f"sweet_rl_sandbox{self.slot}_", dir=self.scratch_root)
        os.chmod(self.scratch, 0o700)
        env = dict(WORKER_ENV, HOME=self.scratch, TMPDIR=self.scratch)
        command = [sys.executable, "-S", WORKER_PATH, "--slot", str(self.slot), "--scratch", self.scratch]
        for folder in library_folders():
            command += ["--library", folder]
        self.process = subprocess.Popen(
            # not -I: it would ignore PYTHONHASHSEED, and every worker must iterate sets in the
            # same order (a reference and its answer run in different workers); the
            # environment is ours entirely. -S: no site module, see library_folders
            command,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            cwd=self.scratch, start_new_session=True, text=True, bufsize=1)
        hello = self.process.stdout.readline()
        if not hello:
            self.close()
            raise SandboxError(f"the sandbox worker did not start ({' '.join(command)})")
        self.isolation = json.loads(hello)["isolation"]

    def run(self, code: str, tests: List[str], rules: str, timeout: float,
            memory_mb: int, reuse: bool = False) -> List[List[str]]:
        """``[[status, detail], ...]`` per test; status ``ok`` carries the encoded value.

        ``reuse`` lets the worker run this job in the child that ran the previous reusable
        job; only for trusted code (reference solutions).
        """
        self.submit(code, tests, rules, timeout, memory_mb, reuse)
        return self.collect()

    def submit(self, code: str, tests: List[str], rules: str, timeout: float,
               memory_mb: int, reuse: bool = False) -> None:
        """Send a job without waiting, so the caller can do other work; then :meth:`collect`."""
        job = json.dumps({"code": code, "tests": tests, "rules": rules, "timeout": timeout,
                          "memory_mb": memory_mb, "reuse": reuse})
        self._pending = (job, len(tests))
        self._send(job)

    def collect(self) -> List[List[str]]:
        """The results of the job sent by :meth:`submit`; a dead worker is restarted and the
        job tried once more on the fresh one, then reported as crashed."""
        job, count = self._pending
        self._pending = None
        for attempt in range(2):
            reply = self._receive()
            if reply is not None:
                return reply
            logger.warning("sandbox worker %d died (attempt %d); restarting it", self.slot, attempt + 1)
            self.close()
            self._start()
            if attempt == 0:
                self._send(job)
        return [["crash", "sandbox worker died"] for _ in range(count)]

    def _send(self, job: str) -> None:
        try:
            self.process.stdin.write(job + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # seen as a missing reply by _receive

    def _receive(self) -> Optional[List[List[str]]]:
        try:
            reply = self.process.stdout.readline()
            return json.loads(reply)["results"] if reply else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def close(self) -> None:
        if self.process is not None:
            try:  # end of input: the worker reaps its kept child and exits
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
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
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __enter__(self) -> "SandboxWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
