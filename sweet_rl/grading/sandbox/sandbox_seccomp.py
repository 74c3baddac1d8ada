"""The seccomp filter every sandboxed child runs under (stdlib only, loaded by path).

Built once in the worker (:class:`SeccompFilter`) and installed in two stages: the fork server
installs all of it but the children's own stage (it must fork the children and send the
worker a pidfd for each, and each child sets its parent death signal under the fork server's
stage), and each child adds that last part, a filter of a few rows, on top: the refusal to
start processes, open pidfds or send messages with descriptors or addresses, and to change
its parent death signal. A child is then under exactly the whole filter, and pays for
compiling a few rows instead of the whole program (the kernel compiles every installed
filter). The filter refuses with EPERM every system call that could start a process, signal
or reach into another one, open a channel out of the sandbox, grow memory outside the
address-space limit, leave state behind (the kernel keyring), watch files outside the
sandbox (inotify, fanotify) or change the confinement; a few calls are refused only for the
arguments that make them dangerous (signal-driven I/O, terminal input injection, datagrams to
an address). A call made through a foreign ABI (i386 or x32 numbers on x86-64, arm32 on arm64)
kills the process: those tables are not checked here.

The program is plain classic BPF over ``struct seccomp_data``::

    int nr; u32 arch; u64 instruction_pointer; u64 args[6];   (offsets 0, 4, 8, 16 + 8 * i)

Both machines are little-endian, so an argument's low 32 bits sit at ``16 + 8 * i`` and its
high 32 bits at ``20 + 8 * i``.
"""

from __future__ import annotations

import ctypes
import os

# System call numbers. Source: the kernel's tables, Linux 6.19 —
# arch/x86/entry/syscalls/syscall_64.tbl (x86-64, the "common" and "64" rows) and
# scripts/syscall.tbl (arm64, the "common" and "64" rows; arm64 builds the memfd_secret row),
# cross-checked against the uapi headers <asm/unistd_64.h> and <asm-generic/unistd.h> of
# linux-libc-dev 6.1 by tests/grading/test_sandbox_confine.py. From 424 on every
# architecture uses the same numbers.
_SHARED = {
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_open": 434, "clone3": 435,
    "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
    "memfd_secret": 447, "open_tree_attr": 467, "process_mrelease": 448, "fchmodat2": 452,
    "setxattrat": 463, "removexattrat": 466, "file_setattr": 469,
}
REFUSED = {
    "x86_64": dict(_SHARED, **{
        "fork": 57, "vfork": 58, "clone": 56, "execve": 59, "execveat": 322,
        "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
        "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43,
        "accept4": 288, "sendmsg": 46, "sendmmsg": 307,
        "add_key": 248, "request_key": 249, "keyctl": 250,
        "memfd_create": 319, "userfaultfd": 323, "perf_event_open": 298, "bpf": 321,
        "mount": 165, "umount2": 166, "unshare": 272, "setns": 308, "pivot_root": 155,
        "chroot": 161, "name_to_handle_at": 303, "open_by_handle_at": 304,
        # System V IPC and POSIX message queues: kernel objects that outlive their process
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
        "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
        "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
        "mq_notify": 244, "mq_getsetattr": 245,
        # metadata no Landlock right covers (mode, owner, times, extended attributes)
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "chown": 92, "fchown": 93, "lchown": 94,
        "fchownat": 260, "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199,
        # watching files the sandbox may not read (their names, sizes and times of change)
        "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254,
        "fanotify_init": 300, "fanotify_mark": 301,
    }),
    # arm64 has no fork/vfork (glibc uses clone)
    "aarch64": dict(_SHARED, **{
        "clone": 220, "execve": 221, "execveat": 281,
        "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
        "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201,
        "accept": 202, "accept4": 242, "sendmsg": 211, "sendmmsg": 269,
        "add_key": 217, "request_key": 218, "keyctl": 219,
        "memfd_create": 279, "userfaultfd": 282, "perf_event_open": 241, "bpf": 280,
        "mount": 40, "umount2": 39, "unshare": 97, "setns": 268, "pivot_root": 41,
        "chroot": 51, "name_to_handle_at": 264, "open_by_handle_at": 265,
        "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193,
        "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188,
        "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
        "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185,
        "fchmod": 52, "fchmodat": 53, "fchown": 55, "fchownat": 54, "utimensat": 88,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16,
        "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263,
    }),
}
# refused only for some arguments (same sources)
FILTERED = {"x86_64": {"sendto": 44, "fcntl": 72, "ioctl": 16},
            "aarch64": {"sendto": 206, "fcntl": 25, "ioctl": 29}}
# calls that act on the process named by their first argument: allowed only on the caller
# itself (pid 0), since the kernel lets any process of the same uid change another's limits,
# niceness, CPUs, scheduling or memory placement (the worker's, the fork server's)
SELF_ONLY = {
    "x86_64": {"prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144,
               "sched_setparam": 142, "sched_setattr": 314, "migrate_pages": 256,
               "move_pages": 279},
    "aarch64": {"prlimit64": 261, "sched_setaffinity": 122, "sched_setscheduler": 119,
                "sched_setparam": 118, "sched_setattr": 274, "migrate_pages": 238,
                "move_pages": 239},
}
# setpriority(which, who, value) and ioprio_set(which, who, value): allowed only for
# ``which`` = a single process (PRIO_PROCESS 0, IOPRIO_WHO_PROCESS 1) and ``who`` = 0 (self);
# a process group or a whole user's processes are other processes
WHICH_WHO = {"x86_64": {"setpriority": (141, 0), "ioprio_set": (251, 1)},
             "aarch64": {"setpriority": (140, 0), "ioprio_set": (30, 1)}}
# the calls that start a process or a program, and the two the fork server hands the worker
# a pidfd per child with (pidfd_open, sendmsg): refused by the children's own stage only
SPAWN = ("fork", "vfork", "clone", "clone3", "execve", "execveat")
CHILD_ONLY = SPAWN + ("pidfd_open", "sendmsg")
# prctl(option, ...): PR_SET_PDEATHSIG (1) is refused by the children's own stage (each child
# sets it before that stage, under the fork server's); a child must not clear it
PRCTL = {"x86_64": 157, "aarch64": 167}
PR_SET_PDEATHSIG = 1
PARTS = ("all", "fork_server", "child")
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # <linux/audit.h>, little-endian
X32_SYSCALL_BIT = 0x40000000

# fcntl commands (<asm-generic/fcntl.h>, the same on both machines): owner and signal of
# signal-driven I/O, leases and directory notifications all deliver signals to an owner
FCNTL_REFUSED = (8, 10, 15, 1024, 1026)  # F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY
F_SETFL, O_ASYNC = 4, 0o20000  # F_SETFL is refused only when it turns O_ASYNC on
# ioctl requests (<asm-generic/ioctls.h>, <asm-generic/sockios.h>): FIOASYNC turns O_ASYNC
# on, FIOSETOWN/SIOCSPGRP set the owner that gets the signals, TIOCSTI types into a terminal
# (asm-generic/ioctls.h); FS_IOC_SETFLAGS, its 32-bit form and FS_IOC_FSSETXATTR
# (<linux/fs.h>) change a file's inode flags, metadata again
IOCTL_REFUSED = (0x5452, 0x8901, 0x8902, 0x5412, 0x40086602, 0x40046602, 0x401C5820)

# classic BPF opcodes and seccomp return values (<linux/filter.h>, <linux/seccomp.h>)
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_EPERM, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000 | 1, 0x80000000
NR, ARCH = 0, 4


def arg_low(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` (little-endian)."""
    return 16 + 8 * index


def arg_high(index: int) -> int:
    return 20 + 8 * index


def _assemble(lines: list) -> list[tuple]:
    """``(code, jt, jf, k)`` rows from lines whose jump targets are label names (or 0 for
    the next row); a bare string is a label. BPF jumps are relative and at most 255 rows."""
    labels, rows = {}, []
    for line in lines:
        if isinstance(line, str):
            labels[line] = len(rows)
        else:
            rows.append(line)
    program = []
    for index, (code, jt, jf, k) in enumerate(rows):
        offsets = []
        for target in (jt, jf):
            offset = 0 if target == 0 else labels[target] - index - 1
            if not 0 <= offset <= 255:
                raise ValueError(f"seccomp jump to {target!r} out of range ({offset})")
            offsets.append(offset)
        program.append((code, offsets[0], offsets[1], k))
    return program


def seccomp_program(machine: str, part: str = "all") -> list[tuple] | None:
    """The BPF program as ``(code, jt, jf, k)`` rows, or None for a machine without tables.
    ``part``: ``all`` of it, the ``fork_server``'s stage (all but the children's), or the
    children's own stage (``child``: the architecture checks, :data:`CHILD_ONLY` and
    ``prctl(PR_SET_PDEATHSIG)``).

    Layout: check the arch (anything else kills), load the number, kill x32 numbers on
    x86-64, send the argument-checked calls to their blocks, refuse each listed call,
    allow the rest. Only those blocks read arguments, so the kernel's per-number verdict
    cache (Linux 5.11+) still skips the filter for every other allowed call.
    """
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    if machine not in REFUSED:
        return None
    refused = {name: number for name, number in REFUSED[machine].items()
               if (part == "all") or ((name in CHILD_ONLY) == (part == "child"))}
    lines = [(LD_ABS, 0, 0, ARCH), (JEQ, 0, "kill", AUDIT_ARCH[machine]), (LD_ABS, 0, 0, NR)]
    if machine == "x86_64":
        lines.append((JGE, "kill", 0, X32_SYSCALL_BIT))
    # prctl's option is an int: only its low half counts
    prctl = ["prctl", (LD_ABS, 0, 0, arg_low(0)), (JEQ, "eperm", "allow", PR_SET_PDEATHSIG)]
    if part == "child":
        lines += [(JEQ, "eperm", 0, number) for number in sorted(refused.values())]
        lines += [(JEQ, 0, "allow", PRCTL[machine])] + prctl[1:]
        lines += ["allow", (RET, 0, 0, RET_ALLOW), "eperm", (RET, 0, 0, RET_EPERM),
                  "kill", (RET, 0, 0, RET_KILL_PROCESS)]
        return _assemble(lines)
    filtered = FILTERED[machine]
    lines += [(JEQ, name, 0, filtered[name]) for name in ("sendto", "fcntl", "ioctl")]
    lines += [(JEQ, "self_only", 0, number) for number in sorted(SELF_ONLY[machine].values())]
    lines += [(JEQ, name, 0, number) for name, (number, _) in WHICH_WHO[machine].items()]
    lines += [(JEQ, "eperm", 0, number) for number in sorted(refused.values())]
    if part == "all":
        lines.append((JEQ, "prctl", 0, PRCTL[machine]))
    lines.append((RET, 0, 0, RET_ALLOW))
    if part == "all":
        lines += prctl
    # sendto(fd, buf, len, flags, dest_addr, addrlen): only without a destination (a pointer:
    # both halves must be zero)
    lines += ["sendto", (LD_ABS, 0, 0, arg_low(4)), (JEQ, 0, "eperm", 0),
              (LD_ABS, 0, 0, arg_high(4)), (JEQ, "allow", "eperm", 0)]
    # pids and ``which``/``who`` are ints to the kernel: only their low halves count
    lines += ["self_only", (LD_ABS, 0, 0, arg_low(0)), (JEQ, "allow", "eperm", 0)]
    for name, (_, which) in WHICH_WHO[machine].items():
        lines += [name, (LD_ABS, 0, 0, arg_low(0)), (JEQ, 0, "eperm", which),
                  (LD_ABS, 0, 0, arg_low(1)), (JEQ, "allow", "eperm", 0)]
    # fcntl(fd, cmd, arg) and ioctl(fd, request, arg): the kernel takes cmd/request as an
    # unsigned int, so only the low half is compared (upper bits are ignored by the kernel:
    # comparing them too would let a caller slip past with garbage there)
    lines += ["fcntl", (LD_ABS, 0, 0, arg_low(1))]
    lines += [(JEQ, "eperm", 0, command) for command in FCNTL_REFUSED]
    lines += [(JEQ, 0, "allow", F_SETFL), (LD_ABS, 0, 0, arg_low(2)),  # O_ASYNC is a low bit
              (JSET, "eperm", "allow", O_ASYNC)]
    lines += ["ioctl", (LD_ABS, 0, 0, arg_low(1))]
    lines += [(JEQ, "eperm", 0, request) for request in IOCTL_REFUSED]
    lines += ["allow", (RET, 0, 0, RET_ALLOW), "eperm", (RET, 0, 0, RET_EPERM),
              "kill", (RET, 0, 0, RET_KILL_PROCESS)]
    return _assemble(lines)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class _Program:
    """One compiled-once BPF program, kept alive for the prctl that installs it."""

    def __init__(self, rows):
        self.rows = (_SockFilter * len(rows))(*[_SockFilter(*row) for row in rows])
        self.fprog = _SockFprog(len(rows), self.rows)
        # made here, once: a fresh child installing the program builds (so copies) less
        self.address = ctypes.byref(self.fprog)

    def install(self, inherited_no_new_privs: bool = False) -> bool:
        """``inherited_no_new_privs``: the caller's parent set it (skip that call unless the
        install then fails for want of it)."""
        if not inherited_no_new_privs:
            _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.address, 0, 0) == 0:
            return True
        return inherited_no_new_privs and self.install()


class SeccompFilter:
    """The filter, built once (in the worker). :meth:`install_fork_server` and then
    :meth:`install_child` (in each child) apply it in two stages; :meth:`install` applies
    it whole. Each applies to the calling process for good and needs no_new_privs, which it
    sets; each is True when it took."""

    def __init__(self, machine: str | None = None):
        machine = machine or os.uname().machine
        self.available = seccomp_program(machine) is not None
        if self.available:
            self._parts = {part: _Program(seccomp_program(machine, part)) for part in PARTS}

    def _install(self, part: str, inherited_no_new_privs: bool = False) -> bool:
        return self.available and self._parts[part].install(inherited_no_new_privs)

    def install(self) -> bool:
        return self._install("all")

    def install_fork_server(self) -> bool:
        return self._install("fork_server")

    def install_child(self) -> bool:
        """The children's stage, over the fork server's (whose no_new_privs they inherit)."""
        return self._install("child", inherited_no_new_privs=True)
