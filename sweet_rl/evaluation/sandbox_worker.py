"""Sandbox worker: runs untrusted Python against test expressions in forked, confined children.

Started by :mod:`sweet_rl.evaluation.sandbox` as ``python -s sandbox_worker.py --slot N
--scratch DIR`` with a scrubbed environment (stdlib only; it loads its two sibling modules by
path). At start it confines *itself* — private network, Landlock, no privileges — then
answers one JSON job per line on stdin with one JSON reply per line on stdout::

    job:   {"code": str, "tests": [expr, ...], "rules": "benchmark"|"strict",
            "timeout": seconds per test, "memory_mb": int, "reuse": bool}
    reply: {"results": [[status, detail], ...]}   status: ok | error | timeout | crash

A job runs in a forked child that adds its own bounds (new session, resource limits, a
seccomp filter against new processes, signals and sockets) and runs the tests in order. An
answer's child serves that one job and is thrown away, so nothing it changes can reach
another answer; with ``reuse`` (reference solutions, which are trusted to be correct though
not to be fast) a healthy child is kept for the next job. Forking from this small warm
process costs about a millisecond, far less than starting Python.

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

import builtins
import gc
import json
import operator
import os
import select
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
PRISTINE_BUILTINS = dict(builtins.__dict__)
REUSED_CPU_SECONDS = 3600  # a reused child is bounded per test by the clock, this is a backstop
MAX_JOBS_PER_CHILD = 500  # a reused child is replaced after this many jobs
MAX_REPLY_BYTES = 32 * 1024 * 1024  # a child that writes more than this is treated as crashed
SETUP_LIMIT = 10.0  # seconds a child may take to confine itself before its first test
READY = b"ready\n"  # a child's first line: from here on the clock of its first test runs
FAST_GRACE = 0.5  # seconds on top of the tests' own bounds before a fast run is given up
FAST_SETUP = 2.0  # seconds a fresh child of a fast run may take to confine itself


class _TestTimeout(BaseException):
    """Raised in the child by its interval timer when a test overruns (fast runs)."""


def _on_alarm(signum, frame):
    raise _TestTimeout()


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _restore(pristine):
    """Put the builtins back as ``pristine`` (a copy) holds them. Checked by identity first,
    in C (``map``/``operator.is_``): rebuilding the dict on every test costs more than the
    test itself for most answers."""
    namespace = builtins.__dict__
    if (len(namespace) == len(pristine) and all(map(operator.is_, namespace.values(), pristine.values()))
            and all(map(operator.is_, namespace, pristine))):
        return
    namespace.clear()
    namespace.update(pristine)


_quote = json.encoder.encode_basestring_ascii  # a JSON string literal, as json.dumps writes it


def _result_line(index, status, detail):
    """``[index, status, detail]`` as one JSON line, without building an encoder per test."""
    return f'[{int(index)}, {_quote(status)}, {_quote(str(detail))}]\n'


def _run_tests(code, tests, start, rules, timeout=None):
    """In the confined child: one result line per test, from ``start`` on.

    With ``timeout`` (fast runs) each test is bounded by an interval timer and all lines are
    written together at the end; without it each line is written as soon as it is known and
    the worker keeps the time. The builtins are put back after every test, so an answer that
    monkeypatches them (``len``, ``int``, ``__import__`` …) changes only its own test, never
    how its output is encoded.
    """
    pristine_builtins = PRISTINE_BUILTINS
    try:
        compiled = compile(code, "<answer>", "exec")
    except BaseException as error:  # a syntax error fails every test, as exec would
        compiled, failure = None, type(error).__name__
    batch = []
    for index in range(start, len(tests)):
        if compiled is None:
            line = [index, "error", failure]
        else:
            try:
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, timeout)
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
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                _restore(pristine_builtins)
                line = [index, "ok", encode(value)]
            except _TestTimeout:
                _restore(pristine_builtins)
                line = [index, "timeout", f"over {timeout} s"]
            except BaseException as error:
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                _restore(pristine_builtins)
                line = [index, "error", type(error).__name__]
        if timeout:
            batch.append(_result_line(*line))
        else:
            _write_all(RESULT_FD, _result_line(*line).encode())
    if batch:
        _write_all(RESULT_FD, "".join(batch).encode())


def _run_job(job):
    _run_tests(job["code"], job["tests"], job["start"], job["rules"],
               job["timeout"] if job.get("fast") else None)


def _child_main(job_fd, job=None):
    """In the confined child: run ``job`` (inherited through the fork) and return, or, for a
    reusable child, each job read from ``job_fd`` until it closes."""
    signal.signal(signal.SIGALRM, _on_alarm)
    if job is not None:
        if not job.get("fast"):  # careful runs time each test from here on
            _write_all(RESULT_FD, READY)
        _run_job(job)
        return
    stream = os.fdopen(job_fd, "r", encoding="utf-8")
    _write_all(RESULT_FD, READY)
    for line in stream:
        _run_job(json.loads(line))


class _Child:
    """A forked, confined child and the worker's ends of its two pipes."""

    def __init__(self, pid, job_fd, result_fd):
        self.pid, self.job_fd, self.result_fd = pid, job_fd, result_fd
        self.buffer, self.received, self.jobs, self.ready = b"", 0, 0, False


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
            _child_main(JOB_FD, task)
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
                _write_all(child.job_fd, (json.dumps(task) + "\n").encode())
            child.jobs += 1
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
            if not child.ready and (child.buffer + chunk).startswith(READY):
                child.ready = True
                chunk = (child.buffer + chunk)[len(READY):]
                child.buffer = b""
                if not fast:
                    deadline = time.monotonic() + timeout
            *lines, child.buffer = (child.buffer + chunk).split(b"\n")
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


def _warm_up():
    """Do once here what CPython otherwise sets up lazily in every child: the first
    ``compile`` of a process builds all the AST node types (about 1.3 ms, most of a bare
    child's cost), and the first encoding builds the encoder's caches."""
    scope = {}
    exec(compile("value = [1, 'a', None]", "<warm-up>", "exec"), scope, scope)
    json.dumps([0, "ok", encode(eval("value", scope, scope))])


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
    _warm_up()
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
