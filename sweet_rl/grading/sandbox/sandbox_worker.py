"""Sandbox worker: runs untrusted Python against test expressions in forked, confined children.

Started by :mod:`sweet_rl.grading.sandbox.client` as ``python -S sandbox_worker.py --slot N
--scratch DIR [--cgroup DIR] [--library DIR ...]`` with a scrubbed environment (stdlib only; it
loads its sibling modules by path). At start it confines *itself* — private network, a
size-bounded private tmpfs for the jobs' folder, Landlock, no privileges, not dumpable — warms
up, forks its fork server (:mod:`sandbox_zygote`, which never sees a job), then answers one JSON
job per line on stdin with one JSON reply per line on stdout::

    job:   {"code": str, "tests": [expr, ...], "rules": "benchmark"|"strict",
            "timeout": seconds per test, "memory_mb": int, "reuse": bool}
    reply: {"results": [[status, detail], ...], "refused": int}
           status: ok | error | timeout | crash; refused: packets without the job's nonce

A job runs in a child forked from the zygote, which confined itself once (a Landlock layer that
lets it write only in the job folder, all of the seccomp filter but the refusal to start
processes). The next job's child is forked as soon as a reply is written, while the grader reads
it: it takes a new session, adds the last seccomp stage and waits for its job on a pipe; once
the job comes it sets the job's resource limits and sends one record per test as soon as it has
it (see :mod:`sandbox_child`). A child that sent its last record is killed at once (it has
nothing left to do); waiting for its exit and emptying the job folder follow the reply. Each
test's expression goes down the pipe only when the previous record has arrived, and from then
this worker gives the test ``timeout`` seconds plus a grace period; a child that overruns (its
timer ignored, stuck in C code) or dies is killed with its process group, that test fails, and a
fresh child carries on with the next test (tests are deterministic). A record also fails as
``timeout`` when the kernel's receive timestamps say the test took longer than its limit,
whatever the child reported. Worst case per job: ``tests x (timeout + GRACE + SETUP_LIMIT)``.

After every answer the job folder is emptied (an iterative, permission-fixing delete); if it
cannot be, the worker replies and exits, and the grader starts a fresh one. With ``reuse``
(reference solutions, trusted to be correct though not to be fast) a healthy child is kept for
the next job.
"""

import fcntl
import gc
import json
import os
import signal
import sys

import _socket

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import sandbox_confine as confine  # noqa: E402
import sandbox_memory as memory  # noqa: E402
import sandbox_records as records  # noqa: E402
import sandbox_zygote as zygote  # noqa: E402
from sandbox_child import (JOB_FD, NONCE_LENGTH, RESULT_FD, JobPipe, parse_job,  # noqa: E402
                           serve, warm_up, write_all)

# sandboxed code imports from the Python installation only, not from this package's folder
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

REUSED_CPU_SECONDS = 3600  # a reused child is bounded per test by the clock, this is a backstop
MAX_JOBS_PER_CHILD = 500  # a reused child is replaced after this many jobs
EXIT_WAIT = 2.0  # seconds a child that sent its last record may take to exit
JOBS_TMPFS_MB = 512  # the size of the private tmpfs that holds the job folder
PIPE_BYTES = 1 << 20  # a job pipe's size: an answer that sends records early makes the
# worker write tests faster than its harness reads them; a full pipe would stall the worker
# (the grading process then replaces it, failing that job only)


def _high(fd, floor=64):
    """``fd`` moved to a number at or above ``floor``: a child puts its channels at 3 and 4,
    which must not land on a descriptor it still needs."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, floor)
    os.close(fd)
    return moved


class Worker:
    def __init__(self, slot, scratch, libraries=(), cgroup=None):
        real_root = os.getuid() == 0
        # the children's memory cgroup, opened while this process still may (see sandbox_memory)
        self.memory = memory.ChildBound(cgroup) if cgroup else None
        uid = (confine.SANDBOX_UID_BASE + slot
               if real_root and confine.installation_readable_by_others() else None)
        confine.pin_to_one_cpu(slot)
        self.private_network = confine.enter_private_network()
        jobs = os.path.join(scratch, "jobs")
        os.mkdir(jobs, 0o700)
        # files an answer writes count against this tmpfs's size, not against the disk
        self.tmpfs = confine.private_tmpfs(jobs, JOBS_TMPFS_MB)
        self.jobdir = os.path.join(jobs, "current")
        os.mkdir(self.jobdir, 0o700)
        if uid is not None:
            for path in (scratch, jobs, self.jobdir):
                os.chown(path, uid, uid)
        self.devnull = _high(os.open(os.devnull, os.O_RDWR))
        os.environ.update(HOME=self.jobdir, TMPDIR=self.jobdir)
        # Landlock confines this worker itself, once: the zygote and the children inherit it;
        # each child adds a layer (built here, once) that lets it write only in the job folder
        landlock = confine.Landlock(jobs, confine.readable_roots(libraries))
        self.landlock_abi = landlock.abi if landlock.restrict() else 0
        self.job_layer = confine.job_ruleset(self.jobdir) if self.landlock_abi else -1
        if self.job_layer >= 0:
            self.job_layer = _high(self.job_layer)
        confine.become(uid)  # no privilege from here on: the children inherit the drop
        confine.set_dumpable(False)  # nothing of the same uid may read or trace our memory
        reachable, blocker = confine.scratch_reachable(self.jobdir, os.getuid())
        if not reachable:
            raise SystemExit(f"the sandbox cannot use its scratch folder {scratch}: {blocker} "
                             "is not searchable by the sandbox's user; pick a scratch root "
                             "(TMPDIR) that every user may enter")
        self.reusable = None  # a child kept for jobs that allow reuse (references)
        self.spare = None  # a child forked ahead of its job (see after_reply)
        self.leftover = None  # the last job's child, stopped, to clean up after the reply
        self.seccomp = confine.SeccompFilter()
        self.isolation = {
            "private_network": self.private_network,
            "landlock_abi": self.landlock_abi,
            "user": (f"uid {uid}" if uid is not None
                     else "root without capabilities" if real_root else "the calling user"),
            "seccomp": self.seccomp.available,
            "private_tmpfs": self.tmpfs,
            "fork_server": True,
            "memory_cgroup": f"v{self.memory.version}" if self.memory else False,
        }
        self.zygote = None

    # -- children --------------------------------------------------------------------------
    def start_zygote(self):
        keep = [self.devnull] + ([self.job_layer] if self.job_layer >= 0 else [])
        self.zygote = zygote.start_zygote(self._child_entry, keep, confine.die_with_parent,
                                          self._confine_zygote)
        if self.memory:  # its children are born in the cgroup
            self.memory.admit(self.zygote.pid)

    def _confine_zygote(self):
        """In the zygote, once: the Landlock layer that lets it (and so every child) write
        only in the job folder, and every seccomp refusal but starting processes, which each
        child adds for itself. A child inherits both for free; applying them per child cost
        about 1 ms of kernel time (merging the Landlock rule trees, compiling the filter)."""
        if self.job_layer >= 0:
            confine.restrict_with(self.job_layer)
            os.close(self.job_layer)
        self.seccomp.install_fork_server()

    def _child_entry(self, folder, job_fd, result_fd, ruleset_fd, zygote_pid):
        """In a fresh child of the zygote: confine, take the job from the pipe, run it.

        A child is forked before its job exists (see :meth:`after_reply`), so everything
        that does not depend on the job (its own session, the Landlock layer, the seccomp
        filter, closing what it inherited) is done while it waits; only the job's resource
        limits are set once the job is known, still before any of the job's code runs.
        """
        os.setsid()
        confine.die_with_parent(zygote_pid)
        os.chdir(folder)
        os.environ.update(HOME=folder, TMPDIR=folder)
        # the received descriptors may sit on 3 or 4 themselves: lift them first
        result_fd, job_fd = _high(result_fd), _high(job_fd)
        os.dup2(result_fd, RESULT_FD)
        os.dup2(job_fd, JOB_FD)
        os.close(result_fd)
        os.close(job_fd)
        self.seccomp.install_spawn()  # the rest of the filter came with the zygote
        for fd in (0, 1, 2):
            os.dup2(self.devnull, fd)
        os.closerange(JOB_FD + 1, 1 << 16)
        pipe = JobPipe(JOB_FD)
        job = parse_job(pipe.line() or b"null")

        def confine_for(task):
            left = task["count"] - task["start"]
            cpu = REUSED_CPU_SECONDS if task.get("reuse") else task["timeout"] * left + 2
            confine.limit_resources(int(task["memory_mb"]), int(cpu))

        serve(job, pipe, confine_for)

    def _fork(self):
        """A child waiting for its job: the spare one forked after the last reply, or a new one."""
        if self.spare is not None:
            child, self.spare = self.spare, None
            return child
        job_read, job_write = os.pipe()
        try:  # room for every test line at once (see _give); the default 64 KiB if refused
            fcntl.fcntl(job_write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        ours.setsockopt(_socket.SOL_SOCKET, records.SO_TIMESTAMPNS, 1)
        try:
            pid = self.zygote.fork(self.jobdir, job_read, theirs.fileno(), -1)
        except OSError:
            os.close(job_write)
            ours.close()
            raise
        finally:
            os.close(job_read)
            theirs.close()
        return records.Child(pid, ours, job_write)

    def _send(self, child, line):
        try:
            write_all(child.job_fd, line)
        except OSError:  # the child is gone already: its socket says so
            pass

    def _give(self, child, task, tests, index):
        """Test ``index``'s expression to the child, when its clock starts (see collect); the
        pipe closes after a one-shot child's last test, so its harness ends there."""
        self._send(child, (json.dumps(tests[index]) + "\n").encode())
        if index == len(tests) - 1 and not task["reuse"]:
            self._close_pipe(child)

    # -- jobs ------------------------------------------------------------------------------
    def run(self, job):
        """Results for every test of ``job`` and the number of refused packets. The job's
        last one-shot child is killed here but cleaned up by :meth:`after_reply`."""
        results = [None] * len(job["tests"])
        index, refused = 0, 0
        while index < len(results):
            task = {"code": job["code"], "count": len(job["tests"]), "start": index,
                    "rules": job["rules"], "timeout": job["timeout"],
                    "memory_mb": job["memory_mb"], "reuse": bool(job.get("reuse")),
                    "nonce": os.urandom(NONCE_LENGTH // 2).hex()}
            reuse = task["reuse"]
            child = self.reusable if reuse and self.reusable else None
            self.reusable = None
            if child is None:
                child = self._fork()
                if self.memory:
                    try:
                        self.memory.limit(task["memory_mb"])
                    except OSError:  # a lower bound than a reused child holds: the old one stays
                        pass
            self._send(child, (json.dumps(task) + "\n").encode())
            # a reference is trusted not to race its own clock: all its tests at once, no
            # round trips (unless they could fill the pipe while its records fill the socket)
            ahead = reuse and sum(len(test) + 8 for test in job["tests"]) < PIPE_BYTES // 8
            if ahead:
                for at in range(index, len(results)):
                    self._give(child, task, job["tests"], at)
            child.jobs += 1
            child.received = 0  # the reply bound is per job (a reused child serves many)
            give = (lambda at: None) if ahead else \
                (lambda at: self._give(child, task, job["tests"], at))
            index, healthy, bad = records.collect(child, task, index, results, self._status, give)
            refused += bad
            if healthy and reuse and child.alive and child.jobs < MAX_JOBS_PER_CHILD:
                self.reusable = child
            elif index < len(results):  # the next test needs a clean folder and a new child
                self._retire(child, finished=healthy)
            else:
                # it has nothing left to send: stopped now, so nothing of it runs beside the
                # grader's next job; waiting for its exit and emptying the folder can follow
                # the reply
                self._stop(child)
                self.leftover = child
        return results, refused

    def after_reply(self):
        """Between jobs, off the grader's clock: clean up after the last child and fork the
        next job's child, which confines itself while the grader works."""
        if self.leftover is not None:
            child, self.leftover = self.leftover, None
            self._retire(child, finished=False)
        if self.spare is None and self.reusable is None:
            try:
                self.spare = self._fork()
            except OSError:  # the next job forks (and reports) for itself
                self.spare = None

    @staticmethod
    def _close_pipe(child):
        if child.job_fd is not None:
            os.close(child.job_fd)
            child.job_fd = None

    def _stop(self, child):
        """Close the child's job pipe and SIGKILL it with its process group (no wait)."""
        self._close_pipe(child)
        if child.alive:
            for target in (lambda: os.killpg(child.pid, signal.SIGKILL),
                           lambda: os.kill(child.pid, signal.SIGKILL)):
                try:
                    target()
                except OSError:
                    pass

    def _retire(self, child, finished):
        """Make sure the child is gone, then empty the job folder for the next one."""
        self._close_pipe(child)
        if child.alive and finished:  # it sent everything: it exits by itself
            records.await_exit(child, EXIT_WAIT)
        if child.alive:
            self._stop(child)
            records.await_exit(child, EXIT_WAIT)
        child.sock.close()
        if child.pid:
            self.zygote.done_with(child.pid)
            child.pid = 0
        if confine.remove_tree(self.jobdir, keep_root=True):
            raise WorkerUnusable(f"could not empty the job folder {self.jobdir}")

    def _status(self, child):
        """The wait status of a child that ended (its pid is freed)."""
        pid, child.pid = child.pid, 0
        return self.zygote.reap(pid) if pid else None

    def close(self):
        for child in (self.reusable, self.leftover, self.spare):
            if child is not None:
                self._retire(child, finished=False)
        self.reusable = self.leftover = self.spare = None
        if self.zygote:
            self.zygote.close()


class WorkerUnusable(RuntimeError):
    """The worker cannot guarantee a clean job folder any more: it must be replaced."""


USAGE = "sandbox_worker.py --slot N --scratch DIR [--cgroup DIR] [--library DIR ...]"


def _arguments(argv):
    """``USAGE``'s arguments (no argparse: see the module docstring)."""
    pairs = list(zip(argv[0::2], argv[1::2]))
    values = {name: value for name, value in pairs if name in ("--slot", "--scratch", "--cgroup")}
    libraries = [value for name, value in pairs if name == "--library"]
    if len(argv) % 2 or not {"--slot", "--scratch"} <= set(values) \
            or len(values) + len(libraries) != len(pairs):
        raise SystemExit(f"usage: {USAGE}, got {argv}")
    return int(values["--slot"]), values["--scratch"], values.get("--cgroup"), libraries


def main():
    slot, scratch, cgroup, libraries = _arguments(sys.argv[1:])
    # started without ``site`` (python -S): answers import third-party packages from the
    # grading interpreter's site-packages folders, which come as arguments
    sys.path.extend(libraries)
    out = sys.stdout
    try:
        worker = Worker(slot, scratch, libraries, cgroup)
    except SystemExit as failure:
        out.write(json.dumps({"error": str(failure)}) + "\n")
        out.flush()
        return
    warm_up(worker.devnull)
    # Children write to every object they touch (reference counts), and each first write to a
    # page inherited from the zygote copies it; keeping the garbage collector off the warm
    # objects spares the children from touching all of them.
    gc.collect()
    gc.freeze()
    worker.start_zygote()  # before the first job: the zygote never holds one
    out.write(json.dumps({"isolation": worker.isolation}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            try:
                results, refused = worker.run(job)
            except WorkerUnusable:
                break  # no reply: the grader restarts this worker and sends the job again
            out.write(json.dumps({"results": results, "refused": refused}) + "\n")
            out.flush()
            try:
                worker.after_reply()
            except WorkerUnusable:
                break  # the grader finds this worker gone at its next job and restarts it
    finally:
        worker.close()


if __name__ == "__main__":
    main()
