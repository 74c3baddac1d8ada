"""A memory cgroup for a worker's children: one real bound on all the memory an answer holds.

The address-space limit (RLIMIT_AS) bounds what a child maps, but not what it keeps in files of
its tmpfs job folder or in kernel buffers. A memory cgroup counts all of it. The grading process
makes one cgroup per worker, as a child of its own memory cgroup, and removes it when the worker
is gone (:func:`create` / :func:`remove`); the worker opens the cgroup's files before it confines
itself (:class:`ChildBound`) and moves its fork server in before the first job, so every child
is born inside (moving each child instead cost 6% of the grader's speed). The worker and the
grading process stay outside. An answer over the bound is killed by the kernel's OOM killer,
which only looks inside the cgroup and takes the largest process there: the child, which maps
all of the fork server's pages and its own; its test fails as a crash.

cgroup v2 (``memory.max``) where the memory controller can be delegated to a child, else the
v1 memory hierarchy (``memory.limit_in_bytes``); neither when the caller may not create
cgroups (an unprivileged grader, usually), and the worker then runs without one (the address
space limit, the tmpfs size and the refused memfd_create still bound an answer). Stdlib only:
the worker loads this by path.
"""

import fcntl
import os

NAME_PREFIX = "sweet_rl_sandbox_"
# kernel-side memory of a child beyond its address space: page tables, socket buffers, the
# small files an honest answer may write
SLACK_MB = 64


def memory_cgroup_folder(proc_cgroup, mountinfo, exists=os.path.exists):
    """``(version, folder)`` of the memory cgroup that ``/proc/self/cgroup``'s text names,
    mapped through ``/proc/self/mountinfo``'s text; ``(None, why)`` when there is none."""
    v1_path = v2_path = None
    for line in proc_cgroup.splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        root, mount_point = fields[3], fields[4]
        kind, _source, options = (line.split(" - ", 1)[1].split() + ["", "", ""])[:3]
        if kind == "cgroup" and v1_path is not None and "memory" in options.split(","):
            version, path = 1, v1_path
        elif kind == "cgroup2" and v2_path is not None and v1_path is None:
            version, path = 2, v2_path
        else:
            continue
        # inside a cgroup namespace the path is relative to the mount's root
        relative = path[len(root):] if root != "/" and path.startswith(root) else path
        folder = os.path.join(mount_point, relative.lstrip("/"))
        if exists(folder):
            return version, folder
    return None, "no memory cgroup is mounted for this process"


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def _remove_stale(parent):
    """Remove the empty cgroups earlier graders left (a crashed grader never removed its
    own); a cgroup in use refuses rmdir, so nothing live is touched."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(NAME_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(NAME_PREFIX):].split("_")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass


def create(tag, memory_mb):
    """A new memory cgroup for one worker's children, bounded at ``memory_mb + SLACK_MB``:
    ``(folder, None)``, or ``(None, why)`` where none can be made."""
    try:
        with open("/proc/self/cgroup") as a, open("/proc/self/mountinfo") as b:
            version, parent = memory_cgroup_folder(a.read(), b.read())
    except OSError as error:
        return None, str(error)
    if version is None:
        return None, parent
    _remove_stale(parent)
    folder = os.path.join(parent, f"{NAME_PREFIX}{os.getpid()}_{tag}")
    try:
        if version == 2:
            with open(os.path.join(parent, "cgroup.controllers")) as handle:
                if "memory" not in handle.read().split():
                    return None, f"the memory controller is not available in {parent}"
            with open(os.path.join(parent, "cgroup.subtree_control")) as handle:
                if "memory" not in handle.read().split():
                    _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")
        os.mkdir(folder)
    except OSError as error:
        return None, f"cannot make a cgroup in {parent}: {error.strerror or error}"
    try:
        bound = ChildBound(folder)
        try:
            bound.limit(memory_mb)
        finally:
            bound.close()
    except OSError as error:
        remove(folder)
        return None, f"cannot bound the cgroup {folder}: {error.strerror or error}"
    return folder, None


def kill_all(folder):
    """SIGKILL every process in a worker's cgroup (cgroup v2's ``cgroup.kill`` where the
    kernel has it, Linux 5.14, else each pid ``cgroup.procs`` lists); never raises."""
    try:
        _write(os.path.join(folder, "cgroup.kill"), "1")
        return
    except OSError:
        pass
    for _ in range(3):  # a process may be forking while it is read: read again
        try:
            with open(os.path.join(folder, "cgroup.procs")) as handle:
                pids = [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def remove(folder):
    """Remove a worker's cgroup once its processes are gone; False if it stays."""
    import time

    for _ in range(50):  # the last child may still be exiting
        try:
            os.rmdir(folder)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)
    return False


def _high(fd, floor=64):
    """``fd`` moved to a number at or above ``floor`` (close-on-exec): the worker's low
    descriptors are where the zygote puts a child's channels (see sandbox_zygote)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    os.close(fd)
    return moved


class ChildBound:
    """The worker's handles on its children's cgroup, opened while it still may open them
    (before Landlock and the privilege drop); writes through them keep working after."""

    def __init__(self, folder):
        self.version = 2 if os.path.exists(os.path.join(folder, "memory.max")) else 1
        limit_file = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        self.procs = _high(os.open(os.path.join(folder, "cgroup.procs"),
                                   os.O_WRONLY | os.O_CLOEXEC))
        self.limit_fd = _high(os.open(os.path.join(folder, limit_file),
                                      os.O_WRONLY | os.O_CLOEXEC))
        swap = os.path.join(folder, "memory.swap.max" if self.version == 2
                            else "memory.memsw.limit_in_bytes")
        self.swap_fd = (_high(os.open(swap, os.O_WRONLY | os.O_CLOEXEC))
                        if os.path.exists(swap) else -1)
        self.memory_mb = None

    def limit(self, memory_mb):
        """Bound the cgroup at ``memory_mb + SLACK_MB`` MiB, without swap (skipped when it
        already is: the limit is written once per worker unless jobs ask for another)."""
        if memory_mb == self.memory_mb:
            return
        total = str((int(memory_mb) + SLACK_MB) << 20).encode()
        if self.version == 2:
            os.write(self.limit_fd, total)
            if self.swap_fd >= 0:
                os.write(self.swap_fd, b"0")
        else:  # v1: memory+swap may never be below memory; raise or lower in that order
            order = [(self.limit_fd, total), (self.swap_fd, total)]
            if self.memory_mb is not None and memory_mb > self.memory_mb:
                order.reverse()
            for fd, value in order:
                if fd >= 0:
                    os.write(fd, value)
        self.memory_mb = memory_mb

    def admit(self, pid):
        """Move a process in (the fork server, before any job). False if it is gone."""
        try:
            os.write(self.procs, str(pid).encode())
            return True
        except OSError:
            return False

    def close(self):
        for fd in (self.procs, self.limit_fd, self.swap_fd):
            if fd >= 0:
                os.close(fd)
        self.procs = self.limit_fd = self.swap_fd = -1
