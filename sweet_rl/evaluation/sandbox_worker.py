"""Sandbox worker: runs untrusted Python against test expressions in forked, confined children.

Started by :mod:`sweet_rl.evaluation.sandbox` as ``python -s sandbox_worker.py --slot N
--scratch DIR`` with a scrubbed environment (stdlib only; it loads its two sibling modules by
path). At start it confines *itself* — private network, Landlock, no privileges — then
answers one JSON job per line on stdin with one JSON reply per line on stdout::

    job:   {"code": str, "tests": [expr, ...], "rules": "benchmark"|"strict",
            "timeout": seconds per test, "memory_mb": int, "reuse": bool}
    reply: {"results": [[status, detail], ...]}   status: ok | error | timeout | crash

A job runs in a forked child that adds its own bounds (new session, resource limits, a
seccomp filter against new processes, signals and sockets), runs the tests in order and
writes one line per test to a pipe. The worker gives each test ``timeout`` seconds of wall
time from the previous result; a child that overruns or dies is killed with its whole
process group, the test is recorded as ``timeout``/``crash``, and a fresh child carries on
with the next test. An answer's child serves that one job and is thrown away, so nothing it
changes can reach another answer; with ``reuse`` (reference solutions, which are trusted to
be correct though not to be fast) a healthy child is kept for the next job. Forking from
this small warm process costs well under a millisecond, far less than starting Python.
"""

import argparse
import builtins
import gc
import json
import os
import select
import shutil
import signal
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import sandbox_confine as confine  # noqa: E402
from sandbox_values import encode  # noqa: E402

# sandboxed code imports from the Python installation only, not from this package's folder
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

RESULT_FD, JOB_FD = 3, 4
REUSED_CPU_SECONDS = 3600  # a reused child is bounded per test by the clock, this is a backstop
MAX_JOBS_PER_CHILD = 500  # a reused child is replaced after this many jobs
MAX_REPLY_BYTES = 32 * 1024 * 1024  # a child that writes more than this is treated as crashed
SETUP_LIMIT = 10.0  # seconds a child may take to confine itself before its first test
READY = b"ready\n"  # a child's first line: from here on the clock of its first test runs


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _restore(pristine):
    namespace = builtins.__dict__
    namespace.clear()
    namespace.update(pristine)


def _run_tests(code, tests, start, rules):
    """In the confined child: one result line per test, from ``start`` on.

    The builtins are put back after every test, so an answer that monkeypatches them (``len``,
    ``int``, ``__import__`` …) changes only its own test, never how its output is encoded.
    """
    pristine_builtins = dict(builtins.__dict__)
    try:
        compiled = compile(code, "<answer>", "exec")
    except BaseException as error:  # a syntax error fails every test, as exec would
        compiled, failure = None, type(error).__name__
    for index in range(start, len(tests)):
        if compiled is None:
            line = [index, "error", failure]
        else:
            try:
                if rules == "benchmark":
                    # the published rules: separate globals and locals, so top-level helpers
                    # and imports are not visible from inside the answer's function
                    scope_globals, scope_locals = {}, {}
                    exec(compiled, scope_globals, scope_locals)
                    value = eval(tests[index], scope_globals, scope_locals)
                else:
                    module = {"__name__": "__sandboxed__", "__builtins__": __builtins__}
                    exec(compiled, module)
                    value = eval(tests[index], module)
                _restore(pristine_builtins)
                line = [index, "ok", encode(value)]
            except BaseException as error:
                _restore(pristine_builtins)
                line = [index, "error", type(error).__name__]
        _write_all(RESULT_FD, (json.dumps(line) + "\n").encode())


def _child_main(job_fd):
    """In the confined child: run each job read from ``job_fd`` until it closes."""
    stream = os.fdopen(job_fd, "r", encoding="utf-8")
    _write_all(RESULT_FD, READY)
    for line in stream:
        job = json.loads(line)
        _run_tests(job["code"], job["tests"], job["start"], job["rules"])


class _Child:
    """A forked, confined child and the worker's ends of its two pipes."""

    def __init__(self, pid, job_fd, result_fd):
        self.pid, self.job_fd, self.result_fd = pid, job_fd, result_fd
        self.buffer, self.received, self.jobs, self.ready = b"", 0, 0, False


class Worker:
    def __init__(self, slot, scratch):
        real_root = os.getuid() == 0
        uid = (confine.SANDBOX_UID_BASE + slot
               if real_root and confine.installation_readable_by_others() else None)
        self.private_network = confine.enter_private_network()
        # one folder for every child of this worker, emptied after each child that wrote
        self.workdir = os.path.join(scratch, "work")
        os.mkdir(self.workdir, 0o700)
        if uid is not None:
            os.chown(scratch, uid, uid)
            os.chown(self.workdir, uid, uid)
        self.devnull = os.open(os.devnull, os.O_RDWR)
        # Landlock confines this worker itself, once: its children inherit the domain, which
        # is much cheaper than a domain per child (seccomp, per child, stops signals)
        landlock = confine.Landlock(scratch, confine.readable_roots())
        self.landlock_abi = landlock.abi if landlock.restrict() else 0
        # the worker needs no privilege from here on: children inherit the dropped one
        confine.become(uid)
        self.reusable = None  # a child kept for jobs that allow reuse (references)
        self.seccomp = confine.SeccompFilter()
        self.isolation = {
            "private_network": self.private_network,
            "landlock_abi": self.landlock_abi,
            "user": (f"uid {uid}" if uid is not None
                     else "root without capabilities" if real_root else "the calling user"),
            "seccomp": self.seccomp.available,
        }

    def _fork(self, job, start):
        job_read, job_write = os.pipe()
        result_read, result_write = os.pipe()
        worker_pid = os.getpid()
        pid = os.fork()
        if pid:
            os.close(job_read)
            os.close(result_write)
            return _Child(pid, job_write, result_read)
        try:  # the child: confine, then run jobs; never returns
            os.setsid()
            os.chdir(self.workdir)
            confine.die_with_parent(worker_pid)
            cpu = REUSED_CPU_SECONDS if job.get("reuse") else job["timeout"] * (len(job["tests"]) - start) + 2
            confine.limit_resources(int(job["memory_mb"]), int(cpu))
            self.seccomp.install()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            os.dup2(result_write, RESULT_FD)
            os.dup2(job_read, JOB_FD)
            os.closerange(JOB_FD + 1, 1 << 16)
            os.environ.update(HOME=self.workdir, TMPDIR=self.workdir)  # the rest was scrubbed
            _child_main(JOB_FD)
        finally:
            os._exit(0)

    def run(self, job):
        """Results for every test of ``job``; a child that overruns or dies is replaced and
        the next test goes to a fresh one."""
        results = [None] * len(job["tests"])
        index = 0
        while index < len(results):
            child = self.reusable if job.get("reuse") and self.reusable else self._fork(job, index)
            self.reusable = None
            task = {"code": job["code"], "tests": job["tests"], "start": index, "rules": job["rules"]}
            _write_all(child.job_fd, (json.dumps(task) + "\n").encode())
            child.jobs += 1
            index, healthy = self._collect(child, job, index, results)
            if healthy and job.get("reuse") and child.jobs < MAX_JOBS_PER_CHILD:
                self.reusable = child
            else:
                self._retire(child)
        return results

    def _collect(self, child, job, index, results):
        """Read result lines until the job is done; ``(next index, child still usable)``."""
        if not child.ready:  # the first test's clock starts once the child is confined
            deadline = time.monotonic() + SETUP_LIMIT
        else:
            deadline = time.monotonic() + job["timeout"]
        while index < len(results):
            wait = deadline - time.monotonic()
            ready = select.select([child.result_fd], [], [], wait)[0] if wait > 0 else []
            if not ready:
                results[index] = ["timeout", f"over {job['timeout']} s"]
                return index + 1, False
            chunk = os.read(child.result_fd, 1 << 16)
            child.received += len(chunk)
            if not chunk:  # the child closed its pipe: it died, most likely
                results[index] = ["crash", self._describe(self._reap(child))]
                return index + 1, False
            if child.received > MAX_REPLY_BYTES:
                results[index] = ["crash", "output too large"]
                return index + 1, False
            if not child.ready and (child.buffer + chunk).startswith(READY):
                child.ready = True
                chunk = (child.buffer + chunk)[len(READY):]
                child.buffer = b""
                deadline = time.monotonic() + job["timeout"]
            *lines, child.buffer = (child.buffer + chunk).split(b"\n")
            for raw in lines:
                try:
                    number, status, detail = json.loads(raw)
                except (ValueError, TypeError):
                    continue
                if number == index and status in ("ok", "error"):
                    results[index] = [status, str(detail)]
                    index += 1
                    deadline = time.monotonic() + job["timeout"]
        return index, True

    def _retire(self, child):
        for fd in (child.job_fd, child.result_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if child.pid:
            self._reap(child)
        self._empty(self.workdir)

    @staticmethod
    def _empty(folder):
        """Remove whatever the child left in its working folder (it is usually empty)."""
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass

    @staticmethod
    def _describe(status):
        if status is None:
            return "exited"
        if os.WIFSIGNALED(status):
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        return f"exited with status {os.WEXITSTATUS(status)}"

    @staticmethod
    def _reap(child):
        """Kill the child's whole process group; return its wait status (None if gone)."""
        pid, child.pid = child.pid, 0
        if not pid:
            return None
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:  # it ended by itself; with no new processes allowed it left no group behind
            return status
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                target()
            except OSError:
                pass
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--scratch", required=True)
    args = parser.parse_args()
    worker = Worker(args.slot, args.scratch)
    # Children write to every object they touch (reference counts), and each first write to a
    # page inherited from the worker copies it; keeping the garbage collector off the worker's
    # own objects spares the children from touching all of them.
    gc.collect()
    gc.freeze()
    out = sys.stdout
    out.write(json.dumps({"isolation": worker.isolation}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        out.write(json.dumps({"results": worker.run(job)}) + "\n")
        out.flush()
    if worker.reusable:  # the grader closed our input: leave no child behind
        worker._retire(worker.reusable)


if __name__ == "__main__":
    main()
