"""Sandbox worker: runs untrusted Python against test expressions in forked, confined children.

Started by :mod:`sweet_rl.grading.sandbox.client` as ``python -S sandbox_worker.py --slot N
--scratch DIR [--cgroup DIR] [--rules benchmark|strict] [--library DIR ...]`` with a scrubbed
environment (stdlib only; it loads its sibling modules by path); ``--rules`` is the grader's
rule set, which the probes of :mod:`sandbox_pinning` run. At start it moves the interpreter's
code into huge pages that every child will share (:mod:`sandbox_hugetext`) and confines
*itself* — a private network, a size-bounded private tmpfs for the jobs' folder, Landlock, then
(after warming up and measuring which of its pages the children will write,
:mod:`sandbox_pinning`, with probes running a trusted job) a pid namespace for its fork server,
no privileges, not dumpable — and forks its fork server (:mod:`sandbox_zygote`, which never
sees a job and pins those pages); then it answers one JSON job per line on stdin with one JSON
reply per line on stdout::

    job:   {"code": str, "tests": [expr, ...], "rules": "benchmark"|"strict",
            "timeout": seconds per test, "memory_mb": int, "reference": bool}
    reply: {"results": [[status, detail], ...], "refused": int}
           status: ok | error | timeout | crash; refused: packets without the job's nonce

A job runs in a child forked from the zygote, which confined itself once (a Landlock layer that
lets it write only in the job folder, all of the seccomp filter but the refusal to start
processes). The zygote is the first process of a pid namespace of the worker's own where the
kernel allows it: when it ends (it dies with the worker), the kernel kills every child left,
whatever a child did to its own parent death signal. The next job's child is forked as soon as
a reply is written, while the grader reads it: it takes a new session, adds the last seccomp
stage and waits for its job on its job channel (a unix stream socket it may only read); once
the job comes it sets the job's resource limits and sends one record per test as soon as it has
it (see :mod:`sandbox_child`). A child that sent its last record is killed at once (it has
nothing left to do); waiting for its exit and emptying the job folder follow the reply. Each
test's expression goes down the channel only when the previous record has arrived, and from
then this worker gives the test ``timeout`` seconds plus a grace period; a child that overruns
(its timer ignored, stuck in C code) or dies is killed, that test fails, and a fresh child
carries on with the next test (tests are deterministic). A job whose code imports a heavy
package gets its children from a fork server that imported it already (the zygote's child,
see :mod:`sandbox_preload`). A record also fails as ``timeout``
when the kernel's receive timestamps say the test took longer than its limit, whatever the
child reported. The worker watches and kills each child through its pidfd.

Every wait here has a deadline (:mod:`sandbox_limits`): writing to a child's job channel, each
round trip with the zygote, each test, each exit. Worst case per job: ``tests x (timeout +
TEST_OVERHEAD)``. Every job, references included, runs in fresh children: nothing one job
does to its process reaches another job.

After every job the job folder is emptied (an iterative, permission-fixing delete); if it
cannot be, or the zygote stops answering, the worker exits without a reply, and the grader
starts a fresh one.
"""

import gc
import json
import os
import select
import signal
import sys
import time

import _socket

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import sandbox_confine as confine  # noqa: E402
import sandbox_hugetext as hugetext  # noqa: E402
import sandbox_memory as memory  # noqa: E402
import sandbox_pinning as pinning  # noqa: E402
import sandbox_preload as preload  # noqa: E402
import sandbox_records as records  # noqa: E402
import sandbox_zygote as zygote  # noqa: E402
from sandbox_child import (JOB_FD, NONCE_LENGTH, RESULT_FD, RULE_SETS,  # noqa: E402
                           JobChannel, job_header, on_alarm, parse_job, serve, text_line,
                           warm_up)
from sandbox_limits import CONTROL_LIMIT, EXIT_WAIT, PRELOAD_LIMIT, SETUP_LIMIT  # noqa: E402

if (RESULT_FD, JOB_FD) != (zygote.FIRST_CHILD_FD, zygote.FIRST_CHILD_FD + 1):
    raise ImportError("a child's channels must be where the zygote puts them")
# sandboxed code imports from the Python installation only, not from this package's folder
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

JOBS_TMPFS_MB = 512  # the size of the private tmpfs that holds the job folder
# a reference's job gets all its tests at once, after its header, when they fit in this many
# bytes (well within a socket's send buffer, so the write never waits)
AHEAD_BYTES = 32 * 1024


def _confine_for(task):
    """A job's own bounds, in its child before any of its code runs."""
    left = task["count"] - task["start"]
    confine.limit_job(int(task["memory_mb"]), int(task["timeout"] * left + 2))


class Worker:
    def __init__(self, slot, scratch, libraries=(), cgroup=None, rules=None):
        real_root = os.getuid() == 0
        self.rules = rules  # the grader's rule set, when it said (the probes run it)
        # the children's memory cgroup, opened while this process still may (see sandbox_memory)
        self.memory = memory.ChildBound(cgroup) if cgroup else None
        uid = (confine.SANDBOX_UID_BASE + slot
               if real_root and confine.installation_readable_by_others() else None)
        if not confine.pidfds_work():
            raise SystemExit("the sandbox watches its children through pidfds, which this "
                             "kernel or Python lacks (Linux 5.3 or later)")
        confine.pin_to_one_cpu(slot)
        self.private_network = confine.enter_private_network()
        self.scratch, self.jobs = scratch, os.path.join(scratch, "jobs")
        os.mkdir(self.jobs, 0o700)
        # files an answer writes count against this tmpfs's size, not against the disk
        self.tmpfs = confine.private_tmpfs(self.jobs, JOBS_TMPFS_MB)
        self.jobdir = os.path.join(self.jobs, "current")
        os.mkdir(self.jobdir, 0o700)
        if uid is not None:
            for path in (scratch, self.jobs, self.jobdir):
                os.chown(path, uid, uid)
        self.uid, self.real_root, self.libraries = uid, real_root, libraries
        self.devnull = zygote.above(os.open(os.devnull, os.O_RDWR))
        os.environ.update(HOME=self.jobdir, TMPDIR=self.jobdir)
        self.current = None  # the child of the job being run
        self.spare = None  # a child forked ahead of its job (see after_reply)
        self.leftover = None  # the last job's child, stopped, to clean up after the reply
        self.seccomp = confine.SeccompFilter()
        # the job channel's reader, made once, here: the zygote and the probes inherit it, so
        # a child writes to fewer inherited pages, and to the ones the probes measured
        self.channel = JobChannel(JOB_FD)
        self.own_pids = False  # until confine_self: a probe dies with this worker
        self.hot = []  # the pages the zygote pins (see sandbox_pinning)
        self.ring = -1  # the io_uring instance it pins them with
        try:  # opened before Landlock, under which nothing in /proc opens
            self.pagemap = pinning.PageMap()
        except OSError:  # nothing is pinned
            self.pagemap = None
        self.pinned = 0  # how many it did pin
        self.zygote = None
        self.preloaded = None  # fork servers holding heavy packages (sandbox_preload)

    def restrict_files(self):
        """Landlock confines this worker itself, once: the zygote and the children inherit
        it; each child adds a layer (built here, once) that lets it write only in the job
        folder."""
        landlock = confine.Landlock(self.jobs, confine.readable_roots(self.libraries))
        self.landlock_abi = landlock.abi if landlock.restrict() else 0
        landlock.close()  # its descriptor would sit where a child's channels go
        self.job_layer = confine.job_ruleset(self.jobdir) if self.landlock_abi else -1
        if self.job_layer >= 0:
            self.job_layer = zygote.above(self.job_layer)

    def prepare(self):
        """Warm up (see sandbox_child.warm_up), freeze what is warm, and measure which pages
        the children will write, as late as may be: after Landlock (whose rules cost many
        allocations, which move where a child's new objects go), before the pid namespace,
        whose first process must be the zygote. The probes run a trusted job only."""
        warm_up(self.devnull)
        # Children write to every object they touch (reference counts), and each first write
        # to a page inherited from the zygote copies it; keeping the garbage collector off the
        # warm objects spares the children from touching all of them.
        gc.collect()
        gc.freeze()
        if self.pagemap is None:
            return
        try:
            counts = pinning.measure(
                self.pagemap,
                lambda round_: pinning.start_probe(self._probe_entry, round_, self.rules))
        except Exception:  # noqa: BLE001 - measuring is only for speed: nothing is pinned
            counts = None
        finally:
            self.pagemap.close()
            self.pagemap = None
        if counts is not None:
            self.hot = pinning.hot_pages(counts, pinning.ROUNDS)

    def _probe_entry(self, parent):
        """A probe (see sandbox_pinning), as a child of the fork server: /dev/null for its
        standard streams and the fork server's seccomp stage (a child has both from the fork
        server), then a child's own entry on the probe job."""
        for fd in (0, 1, 2):
            os.dup2(self.devnull, fd)
        self.seccomp.install_fork_server()
        self._child_entry(parent)
        pinning.probe_done()

    def confine_self(self):
        """The rest of this worker's confinement (the zygote and the children inherit it
        all): the pid namespace its zygote starts, no privileges, not dumpable."""
        uid, real_root = self.uid, self.real_root
        # the zygote (forked next) starts a pid namespace: no child outlives it
        self.own_pids = confine.private_pid_namespace()
        if self.hot:  # made while this process may still lock memory at will (as root)
            ring, _why = pinning.make_ring()
            self.ring = zygote.above(ring) if ring >= 0 else -1
        confine.become(uid)  # no privilege from here on: the children inherit the drop
        confine.set_dumpable(False)  # nothing of the same uid may read or trace our memory
        reachable, blocker = confine.scratch_reachable(self.jobdir, os.getuid())
        if not reachable:
            raise SystemExit(f"the sandbox cannot use its scratch folder {self.scratch}: "
                             f"{blocker} is not searchable by the sandbox's user; pick a "
                             "scratch root (TMPDIR) that every user may enter")
        self.isolation = {
            "private_network": self.private_network,
            "landlock_abi": self.landlock_abi,
            "user": (f"uid {uid}" if uid is not None
                     else "root without capabilities" if real_root else "the calling user"),
            "seccomp": self.seccomp.available,
            "private_tmpfs": self.tmpfs,
            "pid_namespace": self.own_pids,
            "fork_server": True,
            "memory_cgroup": f"v{self.memory.version}" if self.memory else False,
        }

    # -- children --------------------------------------------------------------------------
    def start_zygote(self):
        keep = [self.devnull] + [fd for fd in (self.job_layer, self.ring) if fd >= 0]
        self.zygote = zygote.start_zygote(self._child_entry, keep, confine.die_with_parent,
                                          self._confine_zygote, own_pids=self.own_pids)
        if self.ring >= 0:  # the zygote holds it now
            os.close(self.ring)
            self.ring = -1
        try:  # once confined, it says how many pages it pinned
            self.pinned = self.zygote.ready(CONTROL_LIMIT)
        except OSError as error:
            raise SystemExit(f"the sandbox's fork server did not start: {error}") from None
        if self.memory:  # its children are born in the cgroup
            self.memory.admit(self.zygote.pid)
        self.preloaded = preload.PreloadServers(self.zygote)

    def _confine_zygote(self):
        """In the zygote, once: the Landlock layer that lets it (and so every child) write
        only in the job folder, and every seccomp refusal but the children's own stage, which
        each child adds for itself. A child inherits both for free; applying them per child
        cost about 1 ms of kernel time (merging the Landlock rule trees, compiling the
        filter). First, while the locked-memory limit and the filter still allow it, it pins
        the pages its children nearly always write (see sandbox_pinning): each fork then copies
        them at once, not at each one's first write. Returns how many pages it pinned."""
        pinned = 0
        if self.ring >= 0:  # open for good; a child closes its copy before its job comes
            pinned, _why = pinning.register(self.ring, self.hot)
        os.chdir(self.jobdir)  # every child's working folder
        confine.limit_fork_server()  # the bounds that are the same for every job
        if self.job_layer >= 0:
            confine.restrict_with(self.job_layer)
            os.close(self.job_layer)
        self.seccomp.install_fork_server()
        # the children's timer handler, set once: setting it in each child cost about 3 % of
        # the grader's CPU time. Nothing can send the zygote SIGALRM: it sets no timer, and
        # seccomp refuses the children every way of sending a signal
        signal.signal(signal.SIGALRM, on_alarm)
        return pinned

    def _child_entry(self, zygote_pid):
        """In a fresh child of the zygote: confine, take the job from its channel, run it.

        A child is forked before its job exists (see :meth:`after_reply`), so everything
        that does not depend on the job (its own session, the seccomp filter's last stage,
        closing what it inherited) is done while it waits; only the job's resource limits
        are set once the job is known, still before any of the job's code runs. Its result
        socket and job channel come at ``RESULT_FD`` and ``JOB_FD`` (the zygote puts them
        there); the folder, HOME, TMPDIR, the Landlock layer and stdin/stdout/stderr on
        /dev/null come with the zygote.
        """
        os.setsid()
        if not self.own_pids:  # in a pid namespace of its own, it dies with the zygote anyway
            confine.die_with_parent(zygote_pid)  # before the filter: it refuses to change this
        self.seccomp.install_child()  # the rest of the filter came with the zygote
        os.closerange(JOB_FD + 1, 1 << 16)
        channel = self.channel
        job = parse_job(channel.line(), channel.line())
        serve(job, channel, _confine_for)

    def _fork(self, server=None):
        """A child waiting for its job: from ``server`` (a fork server holding the job's
        packages) when given, else the spare one forked after the last reply, or a new one.
        Raises WorkerUnusable when the zygote does not fork one in time."""
        if server is not None:
            try:
                return self._fork_from(server)
            except WorkerUnusable:  # that server is gone: the zygote's child will do
                self.preloaded.drop(server)
        if self.spare is not None:
            child, self.spare = self.spare, None
            return child
        return self._fork_from(self.zygote)

    def _fork_from(self, server):
        # the job channel: a stream socket whose child end may only read (a pipe could be
        # reopened for writing through /proc/self/fd, and filled)
        job_ours, job_theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        job_theirs.shutdown(_socket.SHUT_WR)
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        ours.setsockopt(_socket.SOL_SOCKET, records.SO_TIMESTAMPNS, 1)
        try:  # the child finds them at RESULT_FD and JOB_FD
            pid, pidfd = server.fork([theirs.fileno(), job_theirs.fileno()])
        except OSError as error:
            ours.close()
            job_ours.close()
            raise WorkerUnusable(f"the fork server did not fork a child: {error}") from None
        finally:
            job_theirs.close()
            theirs.close()
        job_ours.setblocking(False)
        child = records.Child(pid, pidfd, ours, job_ours.detach())
        child.server = server  # it reaps the child
        return child

    @staticmethod
    def _write(child, data, deadline):
        """``data`` down the child's job channel by ``deadline``; False when that failed (the
        child does not read, or is gone): the test's own deadline then fails it."""
        view = memoryview(data)
        while view:
            if child.job_fd is None:
                return False
            try:
                view = view[os.write(child.job_fd, view):]
                continue
            except BlockingIOError:
                pass
            except OSError:
                return False
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [child.job_fd], [], wait)[1]:
                return False
        return True

    def _give(self, child, lines, index, deadline):
        """Test ``index``'s line to the child, when its clock starts (see collect); the
        channel closes after the last test, so the child's harness ends there. Nothing (False)
        when the tests went ahead."""
        if child.job_fd is None:
            return False
        self._write(child, lines[index], deadline)
        if index == len(lines) - 1:
            self._close_channel(child)
        return True

    # -- jobs ------------------------------------------------------------------------------
    def run(self, job):
        """Results for every test of ``job`` and the number of refused packets. The job's
        last child is killed here but cleaned up by :meth:`after_reply`."""
        tests = job["tests"]
        packages = preload.preloadable_imports(job["code"])
        lines = [text_line(test) for test in tests]
        results = [None] * len(tests)
        index, refused, received = 0, 0, [0]
        while index < len(results):
            task = {"code": job["code"], "count": len(tests), "start": index,
                    "rules": job["rules"], "timeout": job["timeout"],
                    "memory_mb": job["memory_mb"],
                    "nonce": os.urandom(NONCE_LENGTH // 2).hex()}
            now = time.monotonic()
            setup_by = now + SETUP_LIMIT
            # None without packages to preload: the child then comes from the zygote
            server = self.preloaded.server_for(packages, now + PRELOAD_LIMIT)
            child = self.current = self._fork(server)
            if self.memory:
                try:
                    self.memory.limit(task["memory_mb"])
                except OSError:  # a lower bound than the children hold now: the old one stays
                    pass
            header = job_header(task)
            ahead = job.get("reference") and b"".join(lines[index:])
            if ahead and len(ahead) <= AHEAD_BYTES:
                # a reference: its tests at once, no round trip per test (each test is still
                # timed from the record before it); it races only its own clock
                self._write(child, header + ahead, setup_by)
                self._close_channel(child)
            else:
                self._write(child, header, setup_by)
            index, healthy, bad = records.collect(
                child, task, index, results, self._status,
                lambda at, deadline: self._give(child, lines, at, deadline), received,
                setup_by=setup_by)
            refused += bad
            if index < len(results):  # the next test needs a clean folder and a new child
                self._retire(child)
            else:
                # it has nothing left to send: stopped now, so nothing of it runs beside the
                # grader's next job; waiting for its exit and emptying the folder can follow
                # the reply
                self._stop(child)
                self.leftover = child
            self.current = None
        return results, refused

    def after_reply(self):
        """Between jobs, off the grader's clock: clean up after the last child and fork the
        next job's child, which confines itself while the grader works."""
        if self.leftover is not None:
            child, self.leftover = self.leftover, None
            self._retire(child)
        if self.spare is None:
            self.spare = self._fork()

    def _close_channel(self, child):
        if child.job_fd is not None:
            os.close(child.job_fd)
            child.job_fd = None

    def _stop(self, child):
        """Close the child's job channel and SIGKILL it (no wait)."""
        self._close_channel(child)
        child.kill()

    def _retire(self, child):
        """Make sure the child is gone, then empty the job folder for the next one."""
        self._stop(child)
        child.ended(EXIT_WAIT)
        child.close()
        if child.pid:
            child.server.done_with(child.pid)
            child.pid = 0
        if confine.remove_tree(self.jobdir, keep_root=True):
            raise WorkerUnusable(f"could not empty the job folder {self.jobdir}")

    def _status(self, child, seconds):
        """The wait status of a child that ended (None if not known within ``seconds``); its
        pid is freed once the zygote reaped it."""
        status = child.server.reap(child.pid, seconds) if child.pid and seconds > 0 else None
        if status is not None:
            child.pid = 0
        return status

    def close(self):
        """Every child is killed and waited for, then the zygote (the first process of the
        children's pid namespace: the kernel kills whatever is left there with it)."""
        for child in (self.current, self.leftover, self.spare):
            if child is not None:
                try:
                    self._retire(child)
                except (WorkerUnusable, OSError):
                    pass
        self.current = self.leftover = self.spare = None
        if self.preloaded:
            self.preloaded.close()
        if self.zygote:
            self.zygote.close()


class WorkerUnusable(RuntimeError):
    """The worker cannot guarantee a clean job folder any more: it must be replaced."""


USAGE = ("sandbox_worker.py --slot N --scratch DIR [--cgroup DIR] [--rules benchmark|strict] "
         "[--library DIR ...]")


def _arguments(argv):
    """``USAGE``'s arguments (no argparse: see the module docstring)."""
    pairs = list(zip(argv[0::2], argv[1::2]))
    values = {name: value for name, value in pairs
              if name in ("--slot", "--scratch", "--cgroup", "--rules")}
    libraries = [value for name, value in pairs if name == "--library"]
    if len(argv) % 2 or not {"--slot", "--scratch"} <= set(values) \
            or len(values) + len(libraries) != len(pairs) \
            or values.get("--rules", RULE_SETS[0]) not in RULE_SETS:
        raise SystemExit(f"usage: {USAGE}, got {argv}")
    return (int(values["--slot"]), values["--scratch"], values.get("--cgroup"), libraries,
            values.get("--rules"))


def main():
    slot, scratch, cgroup, libraries, rules = _arguments(sys.argv[1:])
    # started without ``site`` (python -S): answers import third-party packages from the
    # grading interpreter's site-packages folders, which come as arguments
    sys.path.extend(libraries)
    out = sys.stdout
    worker = None
    # before anything is forked and before Landlock (it reads /proc/self/maps): the fork
    # server and every child share the interpreter's code in huge pages (sandbox_hugetext)
    huge_code, _why = hugetext.move_code_to_huge_pages()
    try:
        worker = Worker(slot, scratch, libraries, cgroup, rules)
        worker.restrict_files()
        worker.prepare()
        worker.confine_self()
        gc.collect()
        gc.freeze()  # what confinement made, as prepare() froze the warm objects
        worker.start_zygote()  # before the first job: the zygote never holds one
    except SystemExit as failure:
        if worker is not None:
            worker.close()
        out.write(json.dumps({"error": str(failure)}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"isolation": worker.isolation, "pinned_pages": worker.pinned,
                          "huge_code_mib": huge_code >> 20}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            try:
                results, refused = worker.run(job)
            except Exception:  # noqa: BLE001 - WorkerUnusable, or anything unforeseen
                break  # no reply: the grader restarts this worker and sends the job again
            out.write(json.dumps({"results": results, "refused": refused}) + "\n")
            out.flush()
            try:
                worker.after_reply()
            except Exception:  # noqa: BLE001
                break  # the grader finds this worker gone at its next job and restarts it
    finally:
        worker.close()


if __name__ == "__main__":
    main()
