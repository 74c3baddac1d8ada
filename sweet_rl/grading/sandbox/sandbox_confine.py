"""Linux confinement for the grader's sandbox: namespaces, mounts, Landlock, seccomp, limits, uid.

Stdlib-only (ctypes for the system calls Python lacks): the sandbox worker loads this file by
path, and the grading process uses its cleanup. Each layer is used when the kernel and our
privileges allow it, and the worker reports which ones are active, so a run records how
isolated it was. The worker calls, in this order (each later step needs the earlier ones):

- ``enter_private_network``: a fresh network namespace, so the only interface is a loopback
  that is down (as root directly, as a normal user inside a new user namespace);
- ``private_tmpfs``: the jobs folder becomes a size-bounded tmpfs in a mount namespace of
  the worker's own, so what answers write counts against that size, not the disk;
- ``Landlock`` (:mod:`sandbox_landlock`, applied to the worker, inherited): reads only under
  the Python installation and system folders, never this project's own files, writes only in
  the jobs folder, no TCP, no signals out of the domain (ABI 6); ``job_ruleset`` builds the
  layer the fork server adds with ``restrict_with`` (every child inherits it) to write only
  in the job folder;
- ``become``: the worker gives up root once — a uid of its own where that uid can still read
  the Python installation, else root without capabilities; ``set_dumpable(False)``;
- ``SeccompFilter`` (:mod:`sandbox_seccomp`, built in the worker; the fork server installs
  all of it but the refusal to start processes, which each child adds);
- ``limit_resources`` (each child): address space, CPU seconds, file size, open files, no
  core dumps, no locked memory, no message queues, RLIMIT_NPROC 0.

:func:`remove_tree` and :func:`scratch_reachable` live in :mod:`sandbox_cleanup`.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import sysconfig


def _sibling(name: str):
    """A module next to this file, however this file was loaded: by the worker (this folder
    is first on its path) or by file path from the grading process."""
    here = os.path.dirname(os.path.abspath(__file__))
    module = sys.modules.get(name)
    if module is None:
        try:
            module = __import__(name)
        except ImportError:
            module = None
    if (
        module is None
        or os.path.dirname(os.path.abspath(getattr(module, "__file__", "") or "")) != here
    ):
        import importlib.util  # only when loaded by file path: the worker never gets here

        spec = importlib.util.spec_from_file_location(name, os.path.join(here, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


if __package__:  # imported as sweet_rl.grading.sandbox.sandbox_confine
    from . import sandbox_cleanup as _cleanup
    from . import sandbox_landlock as _landlock
    from . import sandbox_seccomp as _seccomp
else:
    _cleanup, _landlock, _seccomp = (_sibling(name) for name in
                                     ("sandbox_cleanup", "sandbox_landlock", "sandbox_seccomp"))

# the public names of the sibling modules, so callers need only this one
Landlock, ListOnly, landlock_abi = _landlock.Landlock, _landlock.ListOnly, _landlock.landlock_abi
readable_roots, job_ruleset, restrict_with = (_landlock.readable_roots, _landlock.job_ruleset,
                                              _landlock.restrict_with)
SeccompFilter, seccomp_program = _seccomp.SeccompFilter, _seccomp.seccomp_program
remove_tree, scratch_reachable = _cleanup.remove_tree, _cleanup.scratch_reachable

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_DUMPABLE = 4
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000

SANDBOX_UID_BASE = 61000  # as root, worker slot s runs its children as uid/gid BASE + s


def enter_private_network() -> bool:
    """Move this process into a new network namespace; True when it worked."""
    real_uid, real_gid = os.getuid(), os.getgid()
    if real_uid == 0 and _libc.unshare(CLONE_NEWNET) == 0:
        return True
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return False
    # map ourselves, or files created in the scratch folder would belong to nobody
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {real_uid} 1"),
                           ("gid_map", f"0 {real_gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    except OSError:
        pass
    return True


def limit_resources(
    memory_mb: int, cpu_seconds: int, file_mb: int = 64, open_files: int = 64
) -> None:
    """Bounds for the calling process: address space, CPU seconds (SIGXCPU, then SIGKILL a
    second later), size of a written file, open descriptors, no core dumps, no locked memory
    (mlock, io_uring and BPF buffers), no POSIX message queues (their memory is the kernel's),
    and RLIMIT_NPROC 0: no fork, no thread. A limit is never raised above its current hard
    limit (that would fail without privilege): the lower of the two applies. The worker sets
    them in two parts: :func:`limit_fork_server` once, :func:`limit_job` per child."""
    limit_fork_server(file_mb, open_files)
    limit_job(memory_mb, cpu_seconds)


def _set_limits(limits: dict) -> None:
    for kind, (soft, hard) in limits.items():
        current = resource.getrlimit(kind)[1]
        if current != resource.RLIM_INFINITY:
            hard = min(hard, current)
        resource.setrlimit(kind, (min(soft, hard), hard))


def limit_fork_server(file_mb: int = 64, open_files: int = 64) -> None:
    """The part of :func:`limit_resources` that is the same for every job, set once in the
    fork server (its children inherit it): file size, open descriptors, no core dumps, no
    locked memory, no message queues."""
    _set_limits({
        resource.RLIMIT_FSIZE: (file_mb * 1024 * 1024,) * 2,
        resource.RLIMIT_NOFILE: (open_files, open_files),
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_MEMLOCK: (0, 0),
        resource.RLIMIT_MSGQUEUE: (0, 0),
    })


def limit_job(memory_mb: int, cpu_seconds: int) -> None:
    """The rest of :func:`limit_resources`, per child once its job is known: address space,
    CPU seconds, and RLIMIT_NPROC 0 (the fork server itself must fork)."""
    _set_limits({
        resource.RLIMIT_AS: (memory_mb * 1024 * 1024,) * 2,
        resource.RLIMIT_CPU: (max(1, cpu_seconds), max(1, cpu_seconds) + 1),
        resource.RLIMIT_NPROC: (0, 0),
    })


def set_dumpable(flag: bool) -> bool:
    """PR_SET_DUMPABLE: a process that is not dumpable cannot be ptraced or have its memory,
    descriptors or environment read through /proc by processes of the same uid, and its
    children (which inherit the flag through fork) neither. True when it took."""
    return _libc.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(1 if flag else 0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0


def private_tmpfs(path: str, size_mb: int, inodes: int = 16384) -> bool:
    """Mount a tmpfs of ``size_mb`` MiB and ``inodes`` entries (mode 0700, nosuid, nodev,
    noexec) over the folder ``path``, in a new mount namespace of the calling process only;
    True when it worked, never raises.

    Works as real root and, for a normal user, inside the user namespace that
    :func:`enter_private_network` created (tmpfs may be mounted there). Call it before
    Landlock (a Landlock domain forbids mounting) and before giving up privileges. Mounts
    are first made private, so nothing mounted here shows outside; other processes keep
    seeing the folder as it was, and the tmpfs goes away with the last process inside.
    Must be called while the process has one thread (unshare of a mount namespace).
    """
    try:
        if not os.path.isdir(path) or _libc.unshare(ctypes.c_int(CLONE_NEWNS)) != 0:
            return False
        if _libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
            return False
        options = f"size={max(1, int(size_mb))}m,nr_inodes={max(16, int(inodes))},mode=0700"
        return _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs",
                           ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), options.encode()) == 0
    except Exception:  # noqa: BLE001 - a missing layer is reported, never raised
        return False


def installation_readable_by_others() -> bool:
    """Whether a uid of our own could still import from this Python installation (a Python
    under a 0700 home folder, e.g. pyenv in /root, could not)."""
    for root in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]):
        path = os.path.abspath(root)
        while True:
            if not os.stat(path).st_mode & 0o005 == 0o005:
                return False
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return True


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> bool:
    """Keep uid 0 but give up every capability: file access falls back to plain owner/mode
    checks and RLIMIT_NPROC applies (it is not enforced while CAP_SYS_RESOURCE is held)."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    return _libc.capset(ctypes.byref(header), data) == 0


def private_pid_namespace() -> bool:
    """Let the next process this one forks (the fork server) start a new pid namespace, as
    its first process: when that process ends, the kernel kills every process left in the
    namespace, so no child can outlive its fork server, whatever it did to its own parent
    death signal. Needs privilege (root, or the user namespace of
    :func:`enter_private_network`): call it before :func:`become`. True when it worked.
    Processes inside see other pids than this one does: the worker watches and signals its
    children through pidfds (:func:`pidfds_work`)."""
    return _libc.unshare(ctypes.c_int(CLONE_NEWPID)) == 0


def pidfds_work() -> bool:
    """Whether this kernel and Python give pidfds (Linux 5.3 and later)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except (AttributeError, OSError):
        return False


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the process that forked it dies (PR_SET_PDEATHSIG);
    ``parent_pid`` 0 for the first process of a new pid namespace (its parent is outside)."""
    _libc.prctl(1, 9, 0, 0, 0)
    if os.getppid() != parent_pid:  # the worker died before the line above
        os._exit(1)


def become(uid: int | None) -> bool:
    """As root: switch to a dedicated uid/gid when one is given, else drop capabilities."""
    if os.geteuid() != 0:
        return False
    if uid is None:
        return drop_capabilities()
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    return True


def pin_to_one_cpu(slot):
    """Keep this worker and its children on one CPU (worker ``slot`` on the slot-th CPU it may
    use, round robin). The worker hands each test to its child right after the previous
    record, so the two wake each other about twice per test; on one CPU such a wake-up is a
    cheap switch, across CPUs it waits for the other one to wake (measured with
    benchmarks/bench_grader.py, runs alternated: 171-198 tasks/s pinned, 150-164 not)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[slot % len(cpus)]})
