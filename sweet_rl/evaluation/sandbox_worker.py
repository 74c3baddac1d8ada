"""Sandbox worker: runs untrusted Python against test expressions in forked, confined children.

Started by :mod:`sweet_rl.evaluation.sandbox` as ``python -S sandbox_worker.py --slot N
--scratch DIR [--library DIR ...]`` with a scrubbed environment (stdlib only; it loads its
sibling modules by path; what a child runs is in :mod:`sandbox_child`). At start it confines
*itself* — private network, Landlock, no privileges — then
answers one JSON job per line on stdin with one JSON reply per line on stdout::

    job:   {"code": str, "tests": [expr, ...], "rules": "benchmark"|"strict",
            "timeout": seconds per test, "memory_mb": int, "reuse": bool}
    reply: {"results": [[status, detail], ...]}   status: ok | error | timeout | crash

A job runs in a forked child that adds its own bounds (new session, resource limits, a
seccomp filter against new processes, signals and sockets) and runs the tests in order. An
answer's child serves that one job and is thrown away, so nothing it changes can reach
another answer; with ``reuse`` (reference solutions, which are trusted to be correct though
not to be fast) a healthy child is kept for the next job. Forking from this small warm
process costs about a millisecond, far less than starting Python; what makes a fork cheap
is a small worker (no ``site``, few imports) whose lazily built state (the AST types of
``compile``) exists before the fork, so children do not each build and copy it.

Two ways to run a job, because waking the worker once per test costs as much as the test:

* fast (first): the child bounds each test itself with a ``timeout``-second interval timer
  (a test that overruns is recorded as ``timeout`` and the next one runs) and writes all
  results in one go; the worker waits once, for the whole job, with a backstop of
  ``timeout`` per test plus a grace period;
* careful (only when the fast run failed: the child died, or ignored its timer, e.g. stuck
  in C code or with the alarm disabled): a fresh child writes one line per test, the worker
  gives each test ``timeout`` seconds of wall time from the previous result, kills a child
  that overruns or dies with its whole process group, records ``timeout``/``crash`` for that
  test, and a fresh child carries on with the next test. Tests are deterministic, so running
  the earlier ones again gives the same results.
"""

import gc
import json
import os
import select
import signal
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import sandbox_confine as confine  # noqa: E402
from sandbox_child import JOB_FD, READY, RESULT_FD, child_main, warm_up, write_all  # noqa: E402

# sandboxed code imports from the Python installation only, not from this package's folder
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

REUSED_CPU_SECONDS = 3600  # a reused child is bounded per test by the clock, this is a backstop
MAX_JOBS_PER_CHILD = 500  # a reused child is replaced after this many jobs
# a child that writes more than this is treated as crashed: room for a few outputs of the
# largest size the wire format carries (sandbox_values.MAX_BYTES), escaped once more
MAX_REPLY_BYTES = 160 * 1024 * 1024
SETUP_LIMIT = 10.0  # seconds a child may take to confine itself before its first test
FAST_GRACE = 0.5  # seconds on top of the tests' own bounds before a fast run is given up
FAST_SETUP = 2.0  # seconds a fresh child of a fast run may take to confine itself


class _Child:
    """A forked, confined child and the worker's ends of its two pipes."""

    def __init__(self, pid, job_fd, result_fd):
        self.pid, self.job_fd, self.result_fd = pid, job_fd, result_fd
        # bytes of an unfinished line, as a list of chunks: joined only when a newline comes,
        # so a line of many megabytes is not copied once per chunk
        self.pieces, self.received, self.jobs, self.ready = [], 0, 0, False


class Worker:
    def __init__(self, slot, scratch, libraries=()):
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
        # what children see as their home and temporary folder (the rest was scrubbed); set
        # here once rather than in every child
        os.environ.update(HOME=self.workdir, TMPDIR=self.workdir)
        # Landlock confines this worker itself, once: its children inherit the domain, which
        # is much cheaper than a domain per child (seccomp, per child, stops signals)
        landlock = confine.Landlock(scratch, confine.readable_roots(libraries))
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

    def _fork(self, job, task):
        """A confined child. A one-shot child (``task`` given) runs that task, inherited
        through the fork, and exits; a reusable one (``task`` None) reads tasks from a pipe."""
        job_read, job_write = os.pipe() if task is None else (None, None)
        result_read, result_write = os.pipe()
        worker_pid = os.getpid()
        pid = os.fork()
        if pid:
            if job_read is not None:
                os.close(job_read)
            os.close(result_write)
            return _Child(pid, job_write, result_read)
        try:  # the child: confine, then run jobs; never returns
            os.setsid()
            os.chdir(self.workdir)
            confine.die_with_parent(worker_pid)
            left = len(job["tests"]) - (task["start"] if task else 0)
            cpu = REUSED_CPU_SECONDS if task is None else job["timeout"] * left + 2
            confine.limit_resources(int(job["memory_mb"]), int(cpu))
            self.seccomp.install()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            os.dup2(result_write, RESULT_FD)
            if job_read is not None:
                os.dup2(job_read, JOB_FD)
            os.closerange(RESULT_FD + 1 if task else JOB_FD + 1, 1 << 16)
            child_main(JOB_FD, task)
        finally:
            os._exit(0)

    def run(self, job):
        """Results for every test of ``job``: a fast run first; what it did not deliver is
        run again carefully, where a child that overruns or dies is replaced and the next
        test goes to a fresh one."""
        results = [None] * len(job["tests"])
        index, fast = 0, True
        while index < len(results):
            task = {"code": job["code"], "tests": job["tests"], "start": index,
                    "rules": job["rules"], "timeout": job["timeout"], "fast": fast}
            reuse = job.get("reuse")
            if reuse and self.reusable:
                child = self.reusable
            else:
                child = self._fork(job, None if reuse else task)
            self.reusable = None
            if reuse:
                write_all(child.job_fd, (json.dumps(task) + "\n").encode())
            child.jobs += 1
            child.received = 0  # the reply bound is per job (a reused child serves many)
            reached, healthy = self._collect(child, job, index, results, fast)
            if healthy and reuse and child.jobs < MAX_JOBS_PER_CHILD:
                self.reusable = child
            else:
                self._retire(child)
            if fast and reached < len(results):
                fast = False  # go on carefully from the first test without a result
                for late in range(reached, len(results)):
                    results[late] = None
            index = reached
        return results

    def _collect(self, child, job, index, results, fast):
        """Read result lines until the job is done; ``(next index, child still usable)``.

        Careful runs give each test ``timeout`` seconds from the previous result; fast runs
        give the whole job the tests' own bounds plus a grace period, and on failure report
        how far they got without recording anything for the test that failed.
        """
        timeout = job["timeout"]
        setup = 0.0 if child.ready or not job.get("reuse") else SETUP_LIMIT
        if fast:
            # a one-shot child confines itself inside this budget too
            budget = timeout * (len(results) - index) + FAST_GRACE + (0.0 if job.get("reuse") else FAST_SETUP)
            deadline = time.monotonic() + setup + budget
        else:
            deadline = time.monotonic() + (SETUP_LIMIT if not child.ready else timeout)
        while index < len(results):
            wait = deadline - time.monotonic()
            ready = select.select([child.result_fd], [], [], wait)[0] if wait > 0 else []
            if not ready:
                if fast:
                    return index, False
                results[index] = ["timeout", f"over {timeout} s"]
                return index + 1, False
            chunk = os.read(child.result_fd, 1 << 16)
            child.received += len(chunk)
            if not chunk:  # the child closed its pipe: it died, most likely
                status = self._describe(self._reap(child))
                if fast:
                    return index, False
                results[index] = ["crash", status]
                return index + 1, False
            if child.received > MAX_REPLY_BYTES:
                if fast:
                    return index, False
                results[index] = ["crash", "output too large"]
                return index + 1, False
            if b"\n" not in chunk:
                child.pieces.append(chunk)
                continue
            data = b"".join(child.pieces) + chunk if child.pieces else chunk
            if not child.ready and data.startswith(READY):
                child.ready = True
                data = data[len(READY):]
                if not fast:
                    deadline = time.monotonic() + timeout
            *lines, rest = data.split(b"\n")
            child.pieces = [rest] if rest else []
            for raw in lines:
                try:
                    number, status, detail = json.loads(raw)
                except (ValueError, TypeError):
                    continue
                if number == index and status in ("ok", "error") or (fast and number == index
                                                                    and status == "timeout"):
                    results[index] = [status, str(detail)]
                    index += 1
                    if not fast:
                        deadline = time.monotonic() + timeout
        return index, True

    def _retire(self, child):
        for fd in (child.job_fd, child.result_fd):
            if fd is None:  # a one-shot child has no job pipe
                continue
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
                import shutil  # rarely needed, and it pulls in compression modules

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


def _arguments(argv):
    """``--slot N --scratch DIR [--library DIR ...]`` (no argparse: see the module docstring)."""
    pairs = list(zip(argv[0::2], argv[1::2]))
    values = {name: value for name, value in pairs if name in ("--slot", "--scratch")}
    libraries = [value for name, value in pairs if name == "--library"]
    if len(argv) % 2 or set(values) != {"--slot", "--scratch"} or len(values) + len(libraries) != len(pairs):
        raise SystemExit(f"usage: sandbox_worker.py --slot N --scratch DIR [--library DIR ...], got {argv}")
    return int(values["--slot"]), values["--scratch"], libraries


def main():
    slot, scratch, libraries = _arguments(sys.argv[1:])
    # started without ``site`` (python -S): answers import third-party packages from the
    # grading interpreter's site-packages folders, which come as arguments
    sys.path.extend(libraries)
    worker = Worker(slot, scratch, libraries)
    warm_up(worker.devnull)
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
