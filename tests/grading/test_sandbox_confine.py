"""Process-level confinement of the grader's sandbox: the seccomp filter (run on a BPF
interpreter row by row, and installed for real in a subprocess), resource limits, the
dumpable flag and the private tmpfs (sandbox_seccomp, sandbox_confine)."""

import json
import os
import re
import struct
import textwrap

import pytest

from sweet_rl.grading.sandbox import sandbox_seccomp
from tests.grading.confine_helpers import (IS_ROOT, NOBODY, needs_root, run_script, script_result)

X86_64 = os.uname().machine == "x86_64"
needs_x86_64 = pytest.mark.skipif(not X86_64, reason="system call numbers below are x86-64's")


# -- seccomp: the program, run on a BPF interpreter ------------------------------------------

def run_bpf(program, arch, nr, args=(0, 0, 0, 0, 0, 0)):
    """The verdict of ``program`` on struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}
    (little-endian), interpreting the only opcodes a seccomp filter of ours may use."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if accumulator == k else jf)
        elif code == 0x35:  # BPF_JGE
            pc += 1 + (jt if accumulator >= k else jf)
        elif code == 0x45:  # BPF_JSET
            pc += 1 + (jt if accumulator & k else jf)
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"opcode {code:#x} at {pc}")


ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0x80000000  # SECCOMP_RET_ALLOW, ERRNO|1, KILL_PROCESS
X86, ARM64 = 0xC000003E, 0xC00000B7  # AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64
# every call refused outright, by name: x86-64 numbers from arch/x86/entry/syscalls/syscall_64.tbl,
# arm64 numbers from scripts/syscall.tbl (Linux 6.19); 424 and up are the same everywhere
REFUSED_X86 = {
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322,
    "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "socket": 41,
    "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288,
    "sendmsg": 46, "sendmmsg": 307, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "add_key": 248, "request_key": 249, "keyctl": 250,
    "memfd_create": 319, "memfd_secret": 447, "userfaultfd": 323, "perf_event_open": 298,
    "bpf": 321, "mount": 165, "umount2": 166, "unshare": 272, "setns": 308, "pivot_root": 155,
    "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "open_tree_attr": 467,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "process_madvise": 440,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
    "process_mrelease": 448, "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466,
    "file_setattr": 469, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64,
    "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
    "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
    "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245, "chmod": 90,
    "fchmod": 91, "fchmodat": 268, "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
    "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280, "setxattr": 188,
    "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
    "fremovexattr": 199, "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254,
    "fanotify_init": 300, "fanotify_mark": 301,
}
REFUSED_ARM64 = {
    "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "kill": 129, "tkill": 130,
    "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_send_signal": 424,
    "pidfd_open": 434, "pidfd_getfd": 438, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "kcmp": 272, "socket": 198, "socketpair": 199, "connect": 203,
    "bind": 200, "listen": 201, "accept": 202, "accept4": 242, "sendmsg": 211, "sendmmsg": 269,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "add_key": 217,
    "request_key": 218, "keyctl": 219, "memfd_create": 279, "memfd_secret": 447,
    "userfaultfd": 282, "perf_event_open": 241, "bpf": 280, "mount": 40, "umount2": 39,
    "unshare": 97, "setns": 268, "pivot_root": 41, "chroot": 51, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_tree_attr": 467, "name_to_handle_at": 264,
    "open_by_handle_at": 265, "process_madvise": 440, "landlock_create_ruleset": 444,
    "landlock_add_rule": 445, "landlock_restrict_self": 446, "process_mrelease": 448,
    "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469,
    "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193,
    "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188,
    "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
    "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185, "fchmod": 52,
    "fchmodat": 53, "fchown": 55, "fchownat": 54, "utimensat": 88, "setxattr": 5,
    "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
    "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263,
}
# calls allowed only on the caller itself (pid 0 in the first argument)
SELF_ONLY_X86 = {"prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144,
                 "sched_setparam": 142, "sched_setattr": 314, "migrate_pages": 256,
                 "move_pages": 279}
SELF_ONLY_ARM64 = {"prlimit64": 261, "sched_setaffinity": 122, "sched_setscheduler": 119,
                   "sched_setparam": 118, "sched_setattr": 274, "migrate_pages": 238,
                   "move_pages": 239}
HIGH = 1 << 32  # one bit in an argument's upper half

ROWS_X86 = [
    # (nr, args, verdict): plain calls the child needs
    (0, (), ALLOW), (1, (), ALLOW), (9, (), ALLOW), (3, (), ALLOW),  # read, write, mmap, close
    (317, (), ALLOW), (157, (), ALLOW),  # seccomp (adding filters only narrows), prctl
    # prctl(option): PR_SET_PDEATHSIG (1) refused, whatever the option's upper half holds;
    # PR_GET_PDEATHSIG (2), PR_SET_NAME (15) and the others kept
    (157, (1, 0), EPERM), (157, (HIGH | 1, 0), EPERM), (157, (2, 0), ALLOW),
    (157, (15, 0), ALLOW),
    # sendto(fd, buf, len, flags, dest_addr, addrlen): refused when dest_addr is not NULL,
    # whichever half of the pointer is set
    (44, (3, 0, 1, 0, 0, 0), ALLOW), (44, (3, 0, 1, 0, 0x7FFD1000, 16), EPERM),
    (44, (3, 0, 1, 0, HIGH, 16), EPERM),
    # fcntl(fd, cmd, arg): F_SETOWN 8, F_SETSIG 10, F_SETOWN_EX 15, F_SETLEASE 1024, F_NOTIFY 1026
    (72, (3, 8, 1), EPERM), (72, (3, 10, 9), EPERM), (72, (3, 15, 0), EPERM),
    (72, (3, 1024, 1), EPERM), (72, (3, 1026, 4), EPERM),
    (72, (3, HIGH | 8, 1), EPERM),  # the kernel ignores cmd's upper half: so does the filter
    (72, (3, 3, 0), ALLOW), (72, (3, 1, 0), ALLOW),  # F_GETFL, F_GETFD
    (72, (3, 2, 0o20000), ALLOW),  # F_SETFD: its argument is not file status flags
    # F_SETFL (4): refused only with O_ASYNC (0o20000); O_NONBLOCK is 0o4000
    (72, (3, 4, 0o4000), ALLOW), (72, (3, 4, 0o20000), EPERM), (72, (3, 4, 0o24000), EPERM),
    # ioctl(fd, request, arg): FIOASYNC 0x5452, FIOSETOWN 0x8901, SIOCSPGRP 0x8902, TIOCSTI 0x5412
    (16, (3, 0x5452, 0), EPERM), (16, (3, 0x8901, 0), EPERM), (16, (3, 0x8902, 0), EPERM),
    (16, (3, 0x5412, 0), EPERM), (16, (3, HIGH | 0x5452, 0), EPERM),
    (16, (3, 0x541B, 0), ALLOW), (16, (3, 0x5401, 0), ALLOW),  # FIONREAD, TCGETS
    # FS_IOC_SETFLAGS (and its 32-bit form), FS_IOC_FSSETXATTR: inode flags; GETFLAGS is kept
    (16, (3, 0x40086602, 0), EPERM), (16, (3, 0x40046602, 0), EPERM),
    (16, (3, 0x401C5820, 0), EPERM), (16, (3, 0x80086601, 0), ALLOW),
    # prlimit64(pid, ...): only pid 0 (self); pid_t is an int, so a set upper half with a zero
    # low half still means self to the kernel
    (302, (0, 7, 0, 0), ALLOW), (302, (1234, 7, 0, 0), EPERM), (302, (HIGH, 7), ALLOW),
    (302, (HIGH | 1234, 7), EPERM), (203, (0, 8, 0), ALLOW), (203, (1, 8, 0), EPERM),
    # setpriority(which, who, nice): PRIO_PROCESS 0 of self only; PRIO_PGRP 1, PRIO_USER 2 no
    (141, (0, 0, 5), ALLOW), (141, (0, 1234, 5), EPERM), (141, (1, 0, 5), EPERM),
    (141, (2, 0, 5), EPERM),
    # ioprio_set(which, who, prio): IOPRIO_WHO_PROCESS 1 of self only
    (251, (1, 0, 0), ALLOW), (251, (1, 99, 0), EPERM), (251, (2, 0, 0), EPERM),
    (140, (0, 0, 0), ALLOW),  # getpriority reads only
    # x32 numbers (bit 30) kill: getpid's x32 number and the x32-only range 512..547
    (0x40000000 | 39, (), KILL), (0x40000000 | 520, (), KILL),
]
ROWS_ARM64 = [
    (63, (), ALLOW), (64, (), ALLOW), (222, (), ALLOW),  # read, write, mmap
    (57, (), ALLOW),  # close on arm64 (fork's number on x86-64: the tables must not be mixed)
    (277, (), ALLOW), (167, (), ALLOW),  # seccomp, prctl
    (167, (1, 0), EPERM), (167, (2, 0), ALLOW),
    (206, (3, 0, 1, 0, 0, 0), ALLOW), (206, (3, 0, 1, 0, 0x7FFD1000, 16), EPERM),
    (206, (3, 0, 1, 0, HIGH, 16), EPERM),
    (25, (3, 8, 1), EPERM), (25, (3, 10, 9), EPERM), (25, (3, 15, 0), EPERM),
    (25, (3, 1024, 1), EPERM), (25, (3, 1026, 4), EPERM), (25, (3, 3, 0), ALLOW),
    (25, (3, 4, 0o4000), ALLOW), (25, (3, 4, 0o20000), EPERM),
    (29, (3, 0x5452, 0), EPERM), (29, (3, 0x5412, 0), EPERM), (29, (3, 0x541B, 0), ALLOW),
    (29, (3, 0x40086602, 0), EPERM),
    (261, (0, 7, 0, 0), ALLOW), (261, (99, 7, 0, 0), EPERM), (122, (5, 8, 0), EPERM),
    (140, (0, 0, 5), ALLOW), (140, (0, 99, 5), EPERM), (140, (2, 0, 5), EPERM),
    (30, (1, 0, 0), ALLOW), (30, (1, 99, 0), EPERM),
    (141, (0, 0, 0), ALLOW),  # getpriority reads only
    (0x40000000 | 1, (), ALLOW),  # no x32 on arm64: an unknown number, ENOSYS from the kernel
]


@pytest.mark.parametrize("machine, arch, refused, self_only, rows", [
    ("x86_64", X86, REFUSED_X86, SELF_ONLY_X86, ROWS_X86),
    ("aarch64", ARM64, REFUSED_ARM64, SELF_ONLY_ARM64, ROWS_ARM64)])
def test_seccomp_program_verdicts(machine, arch, refused, self_only, rows):
    program = sandbox_seccomp.seccomp_program(machine)
    assert len(program) <= 4096  # BPF_MAXINSNS
    for name, number in refused.items():
        assert run_bpf(program, arch, number) == EPERM, name
    for name, number in self_only.items():
        assert run_bpf(program, arch, number, (0, 1, 2, 3, 4, 5)) == ALLOW, name
        assert run_bpf(program, arch, number, (4321, 1, 2, 3, 4, 5)) == EPERM, name
    for nr, args, verdict in rows:
        args = tuple(args) + (0,) * (6 - len(args))
        assert run_bpf(program, arch, nr, args) == verdict, (nr, args)
    # any other architecture kills, whatever the number: i386, arm32, and the other machine
    for foreign in (0x40000003, 0x40000028, X86 if arch == ARM64 else ARM64):
        assert run_bpf(program, foreign, 1) == KILL
    # nothing else is refused: every number below 1000 that is not listed is allowed
    filtered = {"x86_64": {44, 72, 16, 141, 251, 157},
                "aarch64": {206, 25, 29, 140, 30, 167}}[machine]
    for nr in set(range(1000)) - set(refused.values()) - set(self_only.values()) - filtered:
        assert run_bpf(program, arch, nr) == ALLOW, nr


SEVERITY = {ALLOW: 0, EPERM: 1, KILL: 2}  # the kernel applies the strictest filter's verdict


@pytest.mark.parametrize("machine, arch, rows", [("x86_64", X86, ROWS_X86),
                                                  ("aarch64", ARM64, ROWS_ARM64)])
def test_the_two_stages_together_give_the_whole_filter(machine, arch, rows):
    whole = sandbox_seccomp.seccomp_program(machine)
    server = sandbox_seccomp.seccomp_program(machine, "fork_server")
    child = sandbox_seccomp.seccomp_program(machine, "child")
    assert len(child) <= 18  # what each child compiles for itself (the whole: about 150)
    cases = [(nr, (0,) * 6) for nr in range(1000)]
    cases += [(nr, tuple(args) + (0,) * (6 - len(args))) for nr, args, _ in rows]
    foreign = [(other, nr, args) for other in (0x40000003, X86 if arch == ARM64 else ARM64)
               for nr, args in cases[:50]]  # i386, the other machine: killed by both stages
    for case_arch, nr, args in [(arch, nr, args) for nr, args in cases] + foreign:
        stacked = max(run_bpf(server, case_arch, nr, args), run_bpf(child, case_arch, nr, args),
                      key=SEVERITY.get)
        assert stacked == run_bpf(whole, case_arch, nr, args), (case_arch, nr, args)
    # the fork server may fork, open pidfds and send them; the children's stage refuses
    # exactly those calls, and prctl(PR_SET_PDEATHSIG), which each child makes before it
    child_numbers = {number for name, number in sandbox_seccomp.REFUSED[machine].items()
                     if name in sandbox_seccomp.CHILD_ONLY}
    assert len(child_numbers) == (8 if machine == "x86_64" else 6)  # arm64 has no fork, vfork
    prctl = sandbox_seccomp.PRCTL[machine]
    for nr in range(1000):
        assert run_bpf(server, arch, nr) == (ALLOW if nr in child_numbers
                                             else run_bpf(whole, arch, nr)), nr
        assert run_bpf(child, arch, nr) == (EPERM if nr in child_numbers else ALLOW), nr
    for option in range(64):
        args = (option, 0, 0, 0, 0, 0)
        assert run_bpf(server, arch, prctl, args) == ALLOW, option
        assert run_bpf(child, arch, prctl, args) == (EPERM if option == 1 else ALLOW), option
    with pytest.raises(ValueError, match="part must be one of"):
        sandbox_seccomp.seccomp_program(machine, "children")


def test_seccomp_tables_are_the_tested_ones():
    assert sandbox_seccomp.REFUSED == {"x86_64": REFUSED_X86, "aarch64": REFUSED_ARM64}
    assert sandbox_seccomp.SELF_ONLY == {"x86_64": SELF_ONLY_X86, "aarch64": SELF_ONLY_ARM64}
    assert sandbox_seccomp.WHICH_WHO == {
        "x86_64": {"setpriority": (141, 0), "ioprio_set": (251, 1)},
        "aarch64": {"setpriority": (140, 0), "ioprio_set": (30, 1)},
    }
    assert sandbox_seccomp.seccomp_program("riscv64") is None


def _header_numbers(path):
    """``name: number`` of every ``#define __NR_name N`` (and asm-generic's __NR3264_ names)."""
    with open(path) as handle:
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r"^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$", handle.read(), re.M)}


@pytest.mark.parametrize("machine, header", [
    ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    ("aarch64", "/usr/include/asm-generic/unistd.h")])
def test_seccomp_numbers_match_the_installed_kernel_headers(machine, header):
    if not os.path.exists(header):
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    known = _header_numbers(header)
    table = dict(
        sandbox_seccomp.REFUSED[machine], prctl=sandbox_seccomp.PRCTL[machine],
        **sandbox_seccomp.FILTERED[machine],
        **sandbox_seccomp.SELF_ONLY[machine],
        **{name: number for name, (number, _) in sandbox_seccomp.WHICH_WHO[machine].items()},
    )
    newer = {name for name in table if name not in known}
    # calls newer than the headers this test is likely to find (Linux 6.6 to 6.17)
    assert newer <= {"open_tree_attr", "fchmodat2", "setxattrat", "removexattrat",
                     "file_setattr"}, newer
    for name in set(table) - newer:
        assert known[name] == table[name], name


# -- seccomp: installed for real, in a subprocess ------------------------------------------

@needs_x86_64
def test_seccomp_filter_refuses_and_allows_on_the_real_kernel():
    results = script_result("""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)  # made before the filter
        r, w = os.pipe()
        here = f"/tmp/sweet_rl_seccomp_probe_{os.getpid()}"
        open(here, "w").close()
        # a bystander to aim at (not the test runner: a filter that failed would renice it);
        # it waits for its pipe to close, which happens when this script exits
        hold_r, hold_w = os.pipe()
        victim = os.fork()
        if victim == 0:
            os.close(hold_w)
            os.read(hold_r, 1)
            os._exit(0)
        assert confine.SeccompFilter().install()
        me = os.getpid()
        ref = {
            "fork": outcome(os.fork),
            "kill": outcome(lambda: os.kill(me, 0)),
            "tgkill": libc_call(libc.tgkill(me, me, 0)),
            "rt_sigqueueinfo": libc_call(libc.sigqueue(me, 0, ctypes.c_void_p(0))),
            "rt_tgsigqueueinfo": raw(297, me, me, 0, 0),
            "pidfd_open": outcome(lambda: os.pidfd_open(me)),
            "pidfd_getfd": raw(438, 0, 1, 0),
            "pidfd_send_signal": raw(424, 0, 0, 0, 0),
            "ptrace": libc_call(libc.ptrace(0, 0, 0, 0)),
            "socket": outcome(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)),
            "socketpair": outcome(socket.socketpair),
            "connect": outcome(lambda: a.connect("\\0elsewhere")),
            "bind": outcome(lambda: a.bind("\\0elsewhere")),
            "sendmsg": outcome(lambda: a.sendmsg([b"x"])),
            "sendto_address": outcome(lambda: a.sendto(b"x", "/tmp/some.sock")),
            "io_uring_setup": raw(425, 1, bytes(120)),
            "add_key": raw(248, b"user", b"note", b"x", 1, 2**32 - 2),
            "keyctl": raw(250, 0, 2**32 - 2, 0),
            "memfd_create": outcome(lambda: os.memfd_create("x")),
            "userfaultfd": raw(323, 0),
            "bpf": raw(321, 0, 0, 0),
            "unshare": libc_call(libc.unshare(0)),
            "chroot": outcome(lambda: os.chroot("/")),
            "execve": outcome(lambda: os.execv("/bin/true", ["true"])),
            "landlock": raw(444, 0, 0, 1),
            "F_SETOWN": outcome(lambda: fcntl.fcntl(a, fcntl.F_SETOWN, me)),
            "F_SETSIG": outcome(lambda: fcntl.fcntl(a, 10, 9)),
            "F_SETOWN_EX": outcome(lambda: fcntl.fcntl(a, 15, bytes(8))),
            "F_SETLEASE": outcome(lambda: fcntl.fcntl(r, 1024, 1)),
            "F_NOTIFY": outcome(lambda: fcntl.fcntl(r, 1026, 4)),
            "F_SETFL_O_ASYNC": outcome(lambda: fcntl.fcntl(a, fcntl.F_SETFL, os.O_ASYNC)),
            "FIOASYNC": outcome(lambda: fcntl.ioctl(a, 0x5452, b"\\1\\0\\0\\0")),
            "FIOSETOWN": outcome(lambda: fcntl.ioctl(a, 0x8901, b"\\1\\0\\0\\0")),
            "SIOCSPGRP": outcome(lambda: fcntl.ioctl(a, 0x8902, b"\\1\\0\\0\\0")),
            "TIOCSTI": outcome(lambda: fcntl.ioctl(r, 0x5412, b"x")),
            "FIOASYNC_high_bits": raw(16, a.fileno(), (1 << 32) | 0x5452, b"\\1\\0\\0\\0"),
            "shmget": raw(29, 0, 4096, 0o1600),
            "msgget": raw(68, 0, 0o1600),
            "semget": raw(64, 0, 1, 0o1600),
            "mq_open": raw(240, b"sweet_rl_probe", os.O_CREAT | os.O_RDWR, 0o600, 0),
            "chmod": outcome(lambda: os.chmod(here, 0o700)),
            "fchmod": outcome(lambda: os.fchmod(r, 0o600)),
            "utime": outcome(lambda: os.utime(here)),
            "setxattr": outcome(lambda: os.setxattr(here, "user.note", b"x")),
            "chown": outcome(lambda: os.chown(here, -1, -1)),
            "inotify_init1": libc_call(libc.inotify_init1(0)),
            "inotify_init": raw(253),
            "fanotify_init": raw(300, 0, 0),
            "PR_SET_PDEATHSIG": libc_call(libc.prctl(1, 0, 0, 0, 0)),
            "prlimit_parent": outcome(
                lambda: resource.prlimit(victim, resource.RLIMIT_NOFILE, (64, 64))),
            "setpriority_parent": outcome(lambda: os.setpriority(os.PRIO_PROCESS, victim, 5)),
            "setpriority_user": outcome(lambda: os.setpriority(os.PRIO_USER, 0, 5)),
            "affinity_parent": outcome(lambda: os.sched_setaffinity(victim, {0})),
            "scheduler_parent": outcome(lambda: os.sched_setscheduler(
                victim, os.SCHED_IDLE, os.sched_param(0))),
        }
        kept = {
            "write": outcome(lambda: os.write(w, b"hello")),
            "read": outcome(lambda: os.read(r, 5)),
            "mmap": outcome(lambda: mmap.mmap(-1, 1 << 20)),
            "send": outcome(lambda: a.send(b"ping")),
            "peer_received": b.recv(10).decode(),
            "F_GETFL": outcome(lambda: fcntl.fcntl(a, fcntl.F_GETFL)),
            "F_SETFL_O_NONBLOCK": outcome(lambda: fcntl.fcntl(a, fcntl.F_SETFL, os.O_NONBLOCK)),
            "nonblocking": bool(fcntl.fcntl(a, fcntl.F_GETFL) & os.O_NONBLOCK),
            "FIONREAD": outcome(lambda: fcntl.ioctl(r, 0x541B, b"\\0\\0\\0\\0")),
            "getpid": os.getpid() == me,
            "prlimit_self": outcome(lambda: resource.prlimit(0, resource.RLIMIT_NOFILE)),
            "setrlimit_self": outcome(lambda: resource.setrlimit(
                resource.RLIMIT_CORE, resource.getrlimit(resource.RLIMIT_CORE))),
            "nice_self": outcome(lambda: os.nice(1)),
            "affinity_self": outcome(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
        }
        os.unlink(here)
        report({"refused": ref, "kept": kept})
    """)
    assert results["refused"] == {name: "EPERM" for name in results["refused"]}
    assert len(results["refused"]) == 54
    assert results["kept"] == {
        "write": "ok", "read": "ok", "mmap": "ok", "send": "ok", "peer_received": "ping",
        "F_GETFL": "ok", "F_SETFL_O_NONBLOCK": "ok", "nonblocking": True, "FIONREAD": "ok",
        "getpid": True, "prlimit_self": "ok", "setrlimit_self": "ok", "nice_self": "ok",
        "affinity_self": "ok"}


@needs_x86_64
def test_the_fork_servers_stage_lets_it_fork_and_its_children_add_the_rest():
    results = script_result("""
        seccomp = confine.SeccompFilter()
        a, b = socket.socketpair()  # made before any filter
        assert seccomp.install_fork_server()
        me = os.getpid()
        server = {"kill": outcome(lambda: os.kill(me, 0)),
                  "socketpair": outcome(lambda: socket.socketpair())}
        r, w = os.pipe()
        child = os.fork()  # allowed at this stage
        if child == 0:
            pdeathsig = libc_call(libc.prctl(1, 9, 0, 0, 0))  # before its own stage: allowed
            assert seccomp.install_child()
            os.write(w, json.dumps({
                "fork": outcome(os.fork), "kill": outcome(lambda: os.kill(me, 0)),
                "pidfd_open": outcome(lambda: os.pidfd_open(me)),
                "sendmsg": outcome(lambda: a.sendmsg([b"x"])),
                "set_pdeathsig_first": pdeathsig,
                "clear_pdeathsig": libc_call(libc.prctl(1, 0, 0, 0, 0))}).encode())
            os._exit(0)
        server["pidfd_open"] = outcome(lambda: os.close(os.pidfd_open(child)))
        server["sendmsg"] = outcome(lambda: a.sendmsg([b"x"]))
        os.waitpid(child, 0)
        os.close(w)
        report({"server": server, "child": json.loads(os.read(r, 4096))})
    """)
    assert results == {"server": {"kill": "EPERM", "socketpair": "EPERM", "pidfd_open": "ok",
                                  "sendmsg": "ok"},
                       "child": {"fork": "EPERM", "kill": "EPERM", "pidfd_open": "EPERM",
                                 "sendmsg": "EPERM", "set_pdeathsig_first": "ok",
                                 "clear_pdeathsig": "EPERM"}}


@needs_x86_64
def test_seccomp_kills_a_process_that_uses_x32_numbers():
    done = run_script("""
        assert confine.SeccompFilter().install()
        print("installed", flush=True)
        raw(0x40000000 | 39)  # getpid through the x32 ABI
        print("survived", flush=True)
    """)
    assert done.stdout.split() == ["installed"]
    assert done.returncode == -31  # SIGSYS: SECCOMP_RET_KILL_PROCESS


# -- resource limits, dumpable -------------------------------------------------------------

def test_limit_resources_sets_every_bound():
    results = script_result("""
        confine.limit_resources(512, 5, file_mb=8, open_files=32)
        names = ["AS", "CPU", "FSIZE", "NOFILE", "CORE", "MEMLOCK", "MSGQUEUE", "NPROC"]
        limits = {n: list(resource.getrlimit(getattr(resource, "RLIMIT_" + n))) for n in names}
        opened = []
        try:
            while True:
                opened.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as error:
            limits["open_error"] = errno.errorcode[error.errno]
        limits["highest_fd"] = max(opened)
        report(limits)
    """)
    mib = 1024 * 1024
    assert results == {
        "AS": [512 * mib, 512 * mib], "CPU": [5, 6],  # SIGXCPU at 5 s, SIGKILL at 6 s
        "FSIZE": [8 * mib, 8 * mib], "NOFILE": [32, 32], "CORE": [0, 0], "MEMLOCK": [0, 0],
        "MSGQUEUE": [0, 0], "NPROC": [0, 0],
        "open_error": "EMFILE", "highest_fd": 31,  # descriptors 0..31 and no more
    }


def test_set_dumpable_is_inherited_by_children():
    results = script_result("""
        PR_GET_DUMPABLE = 3
        off = confine.set_dumpable(False)
        after_off = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
        pid = os.fork()
        if pid == 0:
            os._exit(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
        child = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        on = confine.set_dumpable(True)
        report([off, after_off, child, on, libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)])
    """)
    assert results == [True, 0, 0, True, 1]


# -- private tmpfs -------------------------------------------------------------------------

TMPFS_PROBE = """
    mounted = confine.private_tmpfs(folder, 2)
    info = os.statvfs(folder)
    with open(os.path.join(folder, "one"), "wb") as handle:
        handle.write(b"x" * (1024 * 1024))
    def fill():
        with open(os.path.join(folder, "two"), "wb") as handle:
            handle.write(b"x" * (2 * 1024 * 1024))
    full = outcome(fill)
    fs_type = [line.split(" - ")[1].split()[0] for line in open("/proc/self/mountinfo")
               if line.split()[4] == folder]
    report({"mounted": mounted, "size": info.f_blocks * info.f_frsize, "full": full,
            "mode": oct(stat.S_IMODE(os.stat(folder).st_mode)), "type": fs_type})
"""


@needs_root
def test_private_tmpfs_as_root_is_bounded_and_invisible_outside(tmp_path):
    folder = str(tmp_path / "jobs")
    os.mkdir(folder)
    results = script_result(f"folder = {folder!r}\n" + textwrap.dedent(TMPFS_PROBE))
    # 2 MiB of tmpfs: 1 MiB fits, 2 MiB more does not (ENOSPC), mode 0700 from the options
    assert results == {"mounted": True, "size": 2 * 1024 * 1024, "full": "ENOSPC",
                       "mode": "0o700", "type": ["tmpfs"]}
    assert os.listdir(folder) == []  # the files were written in the subprocess's namespace


@needs_root
def test_private_tmpfs_for_a_normal_user_inside_its_user_namespace(shared_tmp):
    folder = os.path.join(shared_tmp, "jobs")
    os.mkdir(folder)
    os.chown(folder, NOBODY, NOBODY)
    # a uid switch leaves a process non-dumpable, and then its /proc/self/uid_map belongs to
    # root; a normal user's grader was never switched, so the test makes itself dumpable again
    done = run_script(f"folder = {folder!r}\nbecome_user({NOBODY})\nconfine.set_dumpable(True)\n"
                      "if not confine.enter_private_network():\n"
                      "    print('SKIP no user namespaces for this user'); sys.exit(0)\n"
                      + textwrap.dedent(TMPFS_PROBE))
    assert done.returncode == 0, done.stderr
    if done.stdout.startswith("SKIP"):
        pytest.skip(done.stdout.strip())
    results = json.loads(done.stdout.splitlines()[-1])
    assert results == {"mounted": True, "size": 2 * 1024 * 1024, "full": "ENOSPC",
                       "mode": "0o700", "type": ["tmpfs"]}
    assert os.listdir(folder) == []


def test_private_tmpfs_never_raises(tmp_path):
    # a missing folder is refused before anything is unshared (safe in this process)
    from sweet_rl.grading.sandbox.sandbox_confine import private_tmpfs

    assert private_tmpfs(str(tmp_path / "missing"), 1) is False
    # without privileges (a normal user outside any user namespace) it reports failure
    if IS_ROOT:
        os.chmod(tmp_path, 0o755)
        results = script_result(f"become_user({NOBODY})\n"
                                f"report(confine.private_tmpfs({str(tmp_path)!r}, 1))")
        assert results is False
