"""Sandbox worker: runs untrusted Python against test expressions, one forked child per job.

Started by :mod:`sweet_rl.evaluation.sandbox` as ``python -I sandbox_worker.py --slot N
--scratch DIR`` (stdlib only; it loads its two sibling modules by path). It confines itself
to a private network once, then answers one JSON job per line on stdin with one JSON reply
per line on stdout::

    job:   {"code": str, "tests": [expr, ...], "rules": "benchmark"|"strict",
            "timeout": seconds per test, "memory_mb": int}
    reply: {"results": [[status, detail], ...]}   status: ok | error | timeout | crash

For each job the worker forks a child that confines itself (new session, limits, Landlock,
another uid or no capabilities), runs the tests in order and writes one line per test to a
pipe. The worker gives each test ``timeout`` seconds of wall time from the previous result;
a child that overruns or dies is killed with its whole process group, the test is recorded
as ``timeout``/``crash``, and a fresh child carries on with the next test. Forking from this
small warm process costs about a millisecond, far less than starting Python per test.
"""

import argparse
import builtins
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

RESULT_FD = 3
MAX_REPLY_BYTES = 32 * 1024 * 1024  # a child that writes more than this is treated as crashed
START_GRACE = 0.1  # fork and confinement before the first test, seconds


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


class Worker:
    def __init__(self, slot, scratch):
        real_root = os.getuid() == 0
        self.uid = (confine.SANDBOX_UID_BASE + slot
                    if real_root and confine.installation_readable_by_others() else None)
        self.private_network = confine.enter_private_network()
        # one folder for every child of this worker, emptied after each child that wrote
        self.workdir = os.path.join(scratch, "work")
        os.mkdir(self.workdir, 0o700)
        if self.uid is not None:
            os.chown(self.workdir, self.uid, self.uid)
        self.devnull = os.open(os.devnull, os.O_RDWR)
        # Landlock confines this worker itself, once: its children inherit the domain, which
        # is much cheaper than a domain per child (seccomp, per child, stops signals)
        landlock = confine.Landlock(scratch, confine.readable_roots())
        self.landlock_abi = landlock.abi if landlock.restrict() else 0
        self.isolation = {
            "private_network": self.private_network,
            "landlock_abi": self.landlock_abi,
            "user": (f"uid {self.uid}" if self.uid is not None
                     else "root without capabilities" if real_root else "the calling user"),
            "seccomp": confine.seccomp_program(os.uname().machine) is not None,
        }

    def _child(self, job, start, write_fd, workdir, worker_pid):
        """Never returns: confine, run, exit."""
        try:
            os.setsid()
            os.chdir(workdir)
            confine.become(self.uid)
            confine.die_with_parent(worker_pid)  # after become(): a uid change clears it
            budget = int(job["timeout"] * (len(job["tests"]) - start)) + 2
            confine.limit_resources(int(job["memory_mb"]), budget)
            confine.forbid_processes_and_signals()  # last: prctl above still needs no syscall of its list
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            os.dup2(write_fd, RESULT_FD)
            os.closerange(RESULT_FD + 1, 1 << 16)
            os.environ.update(HOME=workdir, TMPDIR=workdir)  # the rest was scrubbed at start
            _run_tests(job["code"], job["tests"], start, job["rules"])
        finally:
            os._exit(0)

    def run(self, job):
        tests = job["tests"]
        results = [None] * len(tests)
        index = 0
        while index < len(tests):
            index = self._run_child(job, index, results)
        return results

    def _run_child(self, job, start, results):
        """Run tests from ``start`` in one child; return the index to restart from."""
        workdir = self.workdir
        read_fd, write_fd = os.pipe()
        worker_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            self._child(job, start, write_fd, workdir, worker_pid)
        os.close(write_fd)
        index, buffer, received, reaped = start, b"", 0, False
        deadline = time.monotonic() + job["timeout"] + START_GRACE
        try:
            while index < len(results):
                wait = deadline - time.monotonic()
                ready = select.select([read_fd], [], [], max(0.0, wait))[0] if wait > 0 else []
                if not ready:
                    results[index] = ["timeout", f"over {job['timeout']} s"]
                    return index + 1
                chunk = os.read(read_fd, 1 << 16)
                received += len(chunk)
                if not chunk or received > MAX_REPLY_BYTES:
                    # the child closed its pipe (died, most likely) or floods it: stop it
                    reason = self._describe(self._reap(pid)) if not chunk else "output too large"
                    reaped = True
                    results[index] = ["crash", reason]
                    return index + 1
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    try:
                        number, status, detail = json.loads(raw)
                    except (ValueError, TypeError):
                        continue
                    if number == index and status in ("ok", "error"):
                        results[index] = [status, str(detail)]
                        index += 1
                        deadline = time.monotonic() + job["timeout"]
            return index
        finally:
            os.close(read_fd)
            if not reaped:
                self._reap(pid)
            self._empty(workdir)

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
    def _reap(pid):
        """Kill the child's whole process group; return its wait status (None if gone)."""
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
    out = sys.stdout
    out.write(json.dumps({"isolation": worker.isolation}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        out.write(json.dumps({"results": worker.run(job)}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
