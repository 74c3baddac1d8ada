"""Landlock for the grader's sandbox (stdlib only, loaded by path; ctypes for three calls).

Two layers:

- the worker's (:class:`Landlock`, applied once to the worker, inherited by the zygote and
  every child): reads only under the Python installation, the system library folders and the
  grading interpreter's site-packages (:func:`readable_roots`), writes only beneath one
  writable root (the jobs folder), no TCP bind/connect (ABI 4), no signals or abstract unix
  sockets outside the domain (ABI 6);
- the job layer (:func:`job_ruleset`, built in the worker before any fork, applied once by
  the fork server with :func:`restrict_with` and inherited by every child): handles only the
  write-type rights and allows them beneath the job folder, so no child can touch the
  worker's other files. (Applied by each child, merging its rule tree into the worker's cost
  about 0.5 ms per child.)

Nothing holding reference solutions may be readable: this project's own package is left out
of every site-packages folder even when it is installed there (a normal install ships
``sweet_rl/data/*.jsonl``), see :func:`readable_roots`.
"""

from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
from collections.abc import Iterable

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

PR_SET_NO_NEW_PRIVS = 38
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_RULE_PATH_BENEATH = 1

# filesystem rights by the Landlock ABI that introduced them (<linux/landlock.h>)
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_ONLY_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_READ_RIGHTS = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
# everything that creates, changes or removes: write_file, remove_dir .. make_sym, refer, truncate
_WRITE_RIGHTS = (
    (_FS_ABI1 & ~(_FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR)) | _FS_REFER | _FS_TRUNCATE
)
_NET_ALL = (1 << 0) | (1 << 1)  # bind_tcp, connect_tcp (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)

# entries of a site-packages folder that belong to this project: the package, its metadata,
# an editable install's finder and path file; and in every library folder, every .pth file
# (paths and import lines, never needed: the worker runs without ``site``)
PROJECT_PATTERNS = ("sweet_rl", "sweet_rl-*.dist-info", "sweet_rl-*.egg-info", "sweet_rl.egg-link",
                    "__editable__*sweet_rl*")
HIDDEN_PATTERNS = PROJECT_PATTERNS + ("*.pth",)
# this file's package (sweet_rl/, two folders up from sweet_rl/grading/sandbox/), wherever it
# is: hidden even under an unusual name
_OWN_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


class ListOnly(str):
    """A folder whose entries' names may be listed (Python's import system lists every
    folder on its path), while nothing beneath it may be read unless a rule of its own says
    so: what :func:`readable_roots` gives for a folder that holds something hidden."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable or disabled."""
    version = _libc.syscall(
        SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )
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


def _ancestors(path: str) -> Iterable[str]:
    """The strict ancestors of a normalized absolute ``path`` (no trailing or doubled
    separator: what ``realpath`` and ``scandir`` give), nearest first."""
    end = path.rfind(os.sep)
    while end > 0:
        yield path[:end]
        end = path.rfind(os.sep, 0, end)
    if path != os.sep:
        yield os.sep


def _library_folders(roots: Iterable[str]) -> set[str]:
    """Other folders that may hold an installed copy of this project: this interpreter's
    site-packages and the usual ones under each readable root (``lib/python3*/`` and
    ``local/lib/python3*/`` ``site-packages`` or ``dist-packages``: a system Python's)."""
    found = {sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")}
    for root in roots:
        for lib in ("lib", "lib64", "local/lib"):
            try:
                versions = [
                    n for n in os.listdir(os.path.join(root, lib)) if n.startswith("python3")
                ]
            except OSError:
                continue
            found.update(os.path.join(root, lib, version, kind) for version in versions
                         for kind in ("site-packages", "dist-packages"))
    return {os.path.realpath(folder) for folder in found if folder and os.path.isdir(folder)}


def _hidden_paths(folders: dict[str, tuple]) -> set[str]:
    """The entries of each folder that match its patterns, and this file's own package."""
    import fnmatch  # here: the worker imports this module at start, and needs it once
    hidden = {_OWN_PACKAGE} if os.path.basename(_OWN_PACKAGE) == "sweet_rl" else set()
    for folder, patterns in folders.items():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        hidden.update(os.path.join(folder, name) for name in names
                      if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns))
    # a hidden entry may be a link (a package linked into site-packages): hide its target too
    return hidden | {os.path.realpath(path) for path in hidden}


def _covered(path: str, folders: set[str]) -> bool:
    """Whether a strict ancestor of ``path`` is in ``folders``."""
    return any(parent in folders for parent in _ancestors(path))


def readable_roots(extra: Iterable[str] = ()) -> list[str]:
    """What sandboxed code may read: the Python installation, the system libraries and
    ``extra`` (the grading interpreter's site-packages folders, which the worker is given),
    less this project's own files and every library folder's .pth files (:data:`HIDDEN_PATTERNS`).

    Each item is a real path readable with everything beneath it, or a :class:`ListOnly`
    folder: a root that holds something hidden is given as list-only, with a rule of its own
    for each entry that is not hidden (descending into the entries that lead to a hidden
    one). Deliberately not every ``sys.path`` entry: an editable install puts the project
    folder there, and its outputs hold reference solutions.
    """
    extra = list(extra)
    names = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             "/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime",
             "/dev/null", "/dev/urandom", *extra}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        names.add(sysconfig.get_paths().get(key, ""))
    roots = {os.path.realpath(name) for name in names if name and os.path.exists(name)}
    folders = {folder: HIDDEN_PATTERNS for folder in _library_folders(roots)}
    folders.update(
        (os.path.realpath(folder), HIDDEN_PATTERNS) for folder in extra if os.path.isdir(folder)
    )
    hidden = _hidden_paths(folders)
    # each path's checks walk its own ancestors (a set lookup each), never the hidden list:
    # a site-packages folder has hundreds of entries and a dozen hidden ones
    above_hidden = {parent for path in hidden for parent in _ancestors(path)}
    readable, listable, seen = set(), set(), set()

    def cover(path: str) -> None:
        """Add rules that allow reading beneath ``path`` except the hidden paths."""
        if path in seen or path in hidden or _covered(path, hidden):
            return
        seen.add(path)
        if path not in above_hidden:
            readable.add(path)
            return
        listable.add(path)  # an ancestor of something hidden: one rule per entry instead
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for entry in entries:
            cover(os.path.realpath(entry.path) if entry.is_symlink() else entry.path)

    for root in sorted(roots):
        cover(root)
    # a folder already readable through another root needs no rule of its own
    readable = {path for path in readable if not _covered(path, readable)}
    return sorted(readable) + [ListOnly(p) for p in sorted(listable)]


def _add_rule(ruleset: int, path: str, rights: int) -> None:
    target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneath(rights, target)
        if _libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                         ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                         ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(target)


def _create_ruleset(abi: int, fs: int, net: int, scoped: int) -> int:
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)  # the struct grew with ABIs 4 and 6
    fd = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    return int(fd)


class Landlock:
    """The worker's ruleset; :meth:`restrict` confines the calling process for good (children
    inherit it). ``writable`` (or None) is the one folder beneath which anything may be
    written; ``readable`` is what :func:`readable_roots` returns."""

    def __init__(self, writable: str | None, readable: Iterable[str]):
        self.abi = landlock_abi()
        self.fd = -1
        if not self.abi:
            return
        fs = _fs_rights(self.abi)
        fd = _create_ruleset(self.abi, fs, _NET_ALL if self.abi >= 4 else 0,
                             _SCOPE_ALL if self.abi >= 6 else 0)
        if fd < 0:
            self.abi = 0
            return
        self.fd = fd
        if writable is not None:
            self._allow(writable, fs)
        for path in readable:
            if isinstance(path, ListOnly):
                self._allow(path, _FS_READ_DIR)
            else:
                self._allow(
                    path, _READ_RIGHTS | _FS_WRITE_FILE if path == "/dev/null" else _READ_RIGHTS
                )

    def _allow(self, path: str, rights: int) -> None:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY_RIGHTS
        if rights & _fs_rights(self.abi):
            _add_rule(self.fd, path, rights & _fs_rights(self.abi))

    def close(self) -> None:
        """Close the ruleset's descriptor (a process it restricted stays restricted)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def restrict(self) -> bool:
        """Confine the calling process (and whatever it could start) for good."""
        if self.fd < 0:
            return False
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return (
            _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0))
            == 0
        )


def job_ruleset(path: str) -> int:
    """A ruleset fd (close-on-exec) that handles only the write-type rights and allows them
    beneath ``path`` (and plain writes to /dev/null, which honest code opens to silence
    output); -1 where Landlock is missing. Build it before forking; reads stay as the
    worker's layer allows."""
    abi = landlock_abi()
    if not abi:
        return -1
    write = _WRITE_RIGHTS & _fs_rights(abi)
    fd = _create_ruleset(abi, write, 0, 0)
    if fd < 0:
        return -1
    try:
        _add_rule(fd, path, write)
        _add_rule(fd, os.devnull, _FS_WRITE_FILE)
    except OSError:
        os.close(fd)
        return -1
    return fd


def restrict_with(fd: int) -> bool:
    """Add the ruleset ``fd`` as a Landlock layer of the calling process, for good: one
    system call when no_new_privs is already set (the worker's :meth:`Landlock.restrict`
    set it, and children inherit it). ``fd`` stays open; False when it did not take."""
    if fd < 0:
        return False
    if _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) == 0:
        return True
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) == 0
