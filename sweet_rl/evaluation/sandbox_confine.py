"""Linux confinement for the grader's sandbox: namespaces, Landlock, resource limits, uid.

Stdlib-only (ctypes for the three Landlock system calls): the sandbox worker loads this file
by path. Each layer is used when the kernel and our privileges allow it, and the worker
reports which ones are active, so a run records how isolated it was:

- ``enter_private_network``: a fresh network namespace, so the only interface is a loopback
  that is down — no connection leaves the process, TCP or otherwise (as root directly, as a
  normal user inside a new user namespace);
- ``Landlock`` (applied to the worker, inherited by its children): reads only under the
  Python installation and system library folders (so the task file with the reference
  solutions cannot be read), writes only in the scratch folder, no TCP bind/connect, and no
  signals to processes outside the sandbox (from Landlock ABI 6);
- ``become``: the worker gives up root once — a uid of its own where that uid can still read
  the Python installation, else root without capabilities;
- ``SeccompFilter`` (built in the worker, installed by each child): fork/clone/exec, kill and
  friends, ptrace and socket fail with EPERM, on every kernel with seccomp (x86-64, arm64);
- ``limit_resources`` (each child): address space, CPU seconds, file size, no core dumps, and
  RLIMIT_NPROC 0 as a second stop against new processes where the kernel enforces it.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import sysconfig
from collections.abc import Iterable

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_RULE_PATH_BENEATH = 1

# filesystem rights by the Landlock ABI that introduced them
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_ONLY_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_READ_RIGHTS = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_NET_ALL = (1 << 0) | (1 << 1)  # bind_tcp, connect_tcp (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)

SANDBOX_UID_BASE = 61000  # as root, worker slot s runs its children as uid/gid BASE + s


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable or disabled."""
    version = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(version))


def _fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def readable_roots(extra: Iterable[str] = ()) -> list[str]:
    """Folders sandboxed code may read: the Python installation, the system libraries and
    ``extra`` (the grading interpreter's site-packages folders, which the worker is given).

    Deliberately not every ``sys.path`` entry: an editable install puts the project folder
    there, and its outputs hold reference solutions.
    """
    names = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             "/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime",
             "/dev/null", "/dev/urandom"}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        names.add(sysconfig.get_paths().get(key, ""))
    names.update(extra)
    return sorted(n for n in names if n and os.path.exists(n))


class Landlock:
    """A ruleset built in the worker, which :meth:`restrict` confines (children inherit it)."""

    def __init__(self, writable: str, readable: Iterable[str]):
        self.abi = landlock_abi()
        self.fd = -1
        if not self.abi:
            return
        fs = _fs_rights(self.abi)
        attr = _RulesetAttr(fs, _NET_ALL if self.abi >= 4 else 0, _SCOPE_ALL if self.abi >= 6 else 0)
        size = 8 if self.abi < 4 else (16 if self.abi < 6 else 24)
        fd = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
        if fd < 0:
            self.abi = 0
            return
        self.fd = int(fd)
        self._allow(writable, fs)
        for path in readable:
            self._allow(path, _READ_RIGHTS | _FS_WRITE_FILE if path == "/dev/null" else _READ_RIGHTS)

    def _allow(self, path: str, rights: int) -> None:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY_RIGHTS
        rights &= _fs_rights(self.abi)
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = _PathBeneath(rights, target)
            if _libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(self.fd),
                             ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                             ctypes.c_uint32(0)) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(target)

    def restrict(self) -> bool:
        """Confine the calling process (and whatever it could start) for good."""
        if self.fd < 0:
            return False
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0)) == 0


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


def limit_resources(memory_mb: int, cpu_seconds: int, file_mb: int = 64) -> None:
    """Bounds for the calling process. RLIMIT_NPROC 0: no fork, no thread."""
    limits = {
        resource.RLIMIT_AS: memory_mb * 1024 * 1024,
        resource.RLIMIT_CPU: max(1, cpu_seconds),
        resource.RLIMIT_FSIZE: file_mb * 1024 * 1024,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NPROC: 0,
    }
    for kind, value in limits.items():
        hard = value + 1 if kind == resource.RLIMIT_CPU else value  # SIGXCPU before SIGKILL
        resource.setrlimit(kind, (value, hard))


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


# seccomp: audit arch and the syscalls refused per machine (fork/vfork exist on x86-64 only)
_SECCOMP_TABLE = {
    "x86_64": (0xC000003E, {"fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59,
                            "execveat": 322, "kill": 62, "tkill": 200, "tgkill": 234,
                            "pidfd_send_signal": 424, "ptrace": 101, "socket": 41,
                            "process_vm_writev": 311, "process_vm_readv": 310}),
    "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435, "execve": 221, "execveat": 281,
                             "kill": 129, "tkill": 130, "tgkill": 131, "pidfd_send_signal": 424,
                             "ptrace": 117, "socket": 198, "process_vm_writev": 271,
                             "process_vm_readv": 270}),
}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str) -> list[tuple] | None:
    """The BPF program as ``(code, jt, jf, k)`` rows, or None for an unknown machine.

    Layout: check the arch (a foreign ABI, e.g. i386 calls on x86-64, kills), load the
    syscall number, refuse x32 numbers on x86-64, compare against each refused call, allow.
    """
    if machine not in _SECCOMP_TABLE:
        return None
    arch, refused = _SECCOMP_TABLE[machine]
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, eperm, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    numbers = sorted(refused.values())
    head = [(load, 0, 0, 4), None, (load, 0, 0, 0)]
    if machine == "x86_64":
        head.append(None)  # x32 check, filled below
    body_start = len(head)
    index_allow = body_start + len(numbers)
    index_eperm, index_kill = index_allow + 1, index_allow + 2
    head[1] = (jeq, 0, index_kill - 2, arch)
    if machine == "x86_64":
        head[3] = (jge, index_kill - 4, 0, 0x40000000)
    body = [(jeq, index_eperm - (body_start + i) - 1, 0, n) for i, n in enumerate(numbers)]
    return head + body + [(ret, 0, 0, allow), (ret, 0, 0, eperm), (ret, 0, 0, kill)]


class SeccompFilter:
    """The filter, built once (in the worker); :meth:`install` applies it to the calling
    process (each child) with two prctl calls."""

    def __init__(self, machine: str | None = None):
        rows = seccomp_program(machine or os.uname().machine)
        self.available = rows is not None
        if rows:
            self._program = (_SockFilter * len(rows))(*[_SockFilter(*row) for row in rows])
            self._fprog = _SockFprog(len(rows), self._program)

    def install(self) -> bool:
        """Confine the calling process for good; True when the filter took."""
        if not self.available:
            return False
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return _libc.prctl(22, 2, ctypes.byref(self._fprog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the worker that forked it dies (PR_SET_PDEATHSIG)."""
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
