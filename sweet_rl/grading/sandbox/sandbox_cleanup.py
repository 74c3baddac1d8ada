"""Removing what a sandboxed answer left behind, and checking that a sandbox uid can reach
its folder (stdlib only; used by the worker, loaded by path, and by the grading process).

An answer controls everything beneath its job folder: folders without any permission, a
chain of folders thousands deep, symbolic links to anywhere, files without permissions.
:func:`remove_tree` deletes all of it without recursion and without following a link,
fixing permissions where it must, and reports what it could not delete instead of raising.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import os
import stat

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

_SYS_FCHMODAT2 = 452  # Linux 6.6+, the same number on every architecture (scripts/syscall.tbl)
_AT_FDCWD, _AT_SYMLINK_NOFOLLOW = -100, 0x100
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FIXED_MODE = 0o700


def _chmod_nofollow(dir_fd: int | None, name: str, mode: int = _FIXED_MODE) -> bool:
    """chmod ``name`` (relative to ``dir_fd``) without following it if it is a link.

    fchmodat2 does that in one call; before Linux 6.6 an O_PATH descriptor opened with
    O_NOFOLLOW pins the entry and /proc/self/fd reaches it (what glibc does). Python's own
    ``os.chmod`` cannot combine ``dir_fd`` with ``follow_symlinks=False``.
    """
    parent = _AT_FDCWD if dir_fd is None else dir_fd
    if _libc.syscall(_SYS_FCHMODAT2, ctypes.c_int(parent), os.fsencode(name),
                     ctypes.c_uint(mode), ctypes.c_int(_AT_SYMLINK_NOFOLLOW)) == 0:
        return True
    if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.ENOENT):  # a link (left alone) or gone
        return False
    try:
        pinned = os.open(
            name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return False
    try:
        os.chmod(f"/proc/self/fd/{pinned}", mode)
        return True
    except OSError:
        return False
    finally:
        os.close(pinned)


def _open_dir(name: str, dir_fd: int | None) -> int:
    """An fd on folder ``name``, its permissions fixed first if they stop us; never a link."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        _chmod_nofollow(dir_fd, name)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _fix(fd: int) -> None:
    try:
        os.fchmod(fd, _FIXED_MODE)
    except OSError:
        pass


def _move_up(fd: int, name: str, root_fd: int, numbers) -> str:
    """Rename subfolder ``name`` of ``fd`` to a fresh name at the top level; return it.
    Moving a folder to another parent needs write permission on the folder itself."""
    fixed = False
    for _ in range(1000):
        new = f".removing-{next(numbers)}"
        try:
            os.rename(name, new, src_dir_fd=fd, dst_dir_fd=root_fd)
            return new
        except PermissionError:
            if fixed:
                raise
            fixed = True
            _fix(fd)
            _chmod_nofollow(fd, name)
        except OSError as error:  # the name is taken at the top level: try another
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
    raise OSError(errno.EEXIST, "no free name at the top level")


def _empty(fd: int, root_fd: int, top: bool, queue, numbers) -> int:
    """Remove every entry of the folder ``fd`` but its subfolders, which are queued: in
    place at the top level (``top``), else moved up to it first. Returns the entries left."""
    try:
        with os.scandir(fd) as listing:
            entries = []
            for entry in listing:
                try:
                    entries.append((entry.name, entry.is_dir(follow_symlinks=False)))
                except OSError:
                    entries.append((entry.name, False))
    except OSError:
        return 1
    left, fixed = 0, False
    for name, is_dir in entries:
        while True:
            try:
                if not is_dir:
                    os.unlink(name, dir_fd=fd)
                else:
                    queue.append(name if top else _move_up(fd, name, root_fd, numbers))
                break
            except FileNotFoundError:
                break
            except PermissionError:
                if fixed:
                    left += 1
                    break
                fixed = True  # the folder itself may be read-only: one fix, then retry
                _fix(fd)
            except OSError:
                left += 1
                break
    return left


def remove_tree(path: str, keep_root: bool = True) -> int:
    """Delete everything beneath ``path`` (and ``path`` itself unless ``keep_root``); return
    the number of entries it could not remove (0: all gone). Never raises, never follows a
    symbolic link (a link is removed, not what it points to), never recurses.

    Every subfolder met is renamed to a fresh name directly under ``path`` and emptied from
    there, so at most two folder descriptors are open and depth never grows, whatever the
    tree's shape. A folder whose permissions stop the removal is made 0700 first (possible
    for its owner; root with capabilities needs no fix). A folder that cannot be entered
    counts as one entry, whatever it holds. When ``path`` is itself a link or a file, it is
    removed without ``keep_root`` and left alone with it.
    """
    try:
        return _remove_tree(os.fspath(path), keep_root)
    except Exception:  # noqa: BLE001 - a cleanup failure is reported, never raised
        return 1


def _remove_tree(path: str, keep_root: bool) -> int:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        if keep_root:
            return 0
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return 0
    try:
        root_fd = _open_dir(path, None)
    except OSError:
        return 1
    queue, numbers, left = collections.deque(), iter(range(1 << 62)), 0
    try:
        left += _empty(root_fd, root_fd, True, queue, numbers)
        while queue:
            name = queue.popleft()
            try:
                fd = _open_dir(name, root_fd)
            except FileNotFoundError:
                continue
            except OSError:
                left += 1
                continue
            try:
                left += _empty(fd, root_fd, False, queue, numbers)
            finally:
                os.close(fd)
            try:
                os.rmdir(name, dir_fd=root_fd)
            except FileNotFoundError:
                pass
            except OSError:
                left += 1
    finally:
        os.close(root_fd)
    if not keep_root:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:
            left += 1
    return left


def scratch_reachable(path: str, uid: int, gid: int | None = None) -> tuple[bool, str | None]:
    """Whether a process of ``uid``/``gid`` (gid defaults to uid, no supplementary groups,
    no capabilities: how the worker runs its children) can reach ``path`` and create
    entries in it. ``(True, None)``, or ``(False, folder)`` naming the first folder on the
    way (symbolic links resolved) that stops it: one not searchable, or ``path`` itself
    when it is not writable (or missing).

    Plain mode bits only (the owner's, else the group's, else everyone's, as the kernel
    picks them); ACLs are not read, so a folder opened to the uid only by an ACL is
    reported as blocking.
    """
    gid = uid if gid is None else gid
    target = os.path.realpath(path)
    folders = [target]
    while os.path.dirname(folders[-1]) != folders[-1]:
        folders.append(os.path.dirname(folders[-1]))
    for folder in reversed(folders):
        need = 0o3 if folder == target else 0o1  # write + search on the target, search above
        try:
            info = os.stat(folder)
        except OSError:
            return False, folder
        if info.st_uid == uid:
            bits = info.st_mode >> 6
        elif info.st_gid == gid:
            bits = info.st_mode >> 3
        else:
            bits = info.st_mode
        if not stat.S_ISDIR(info.st_mode) or bits & need != need:
            return False, folder
    return True, None
