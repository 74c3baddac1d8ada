"""The interpreter's machine code moved into transparent huge pages, once per worker.

Loaded by path by :mod:`sandbox_worker` (stdlib and ctypes only). Every child is a fresh
process, and a fresh process pays for each 4 KiB page it first touches: the kernel fills the
child's page table entry at a page fault, and a hypervisor that shadows page tables (the
2-core development machine is such a guest) fills its own mapping too, about 0.4 µs a page
there. A child runs some 500 pages of the interpreter's code. A 2 MiB page is one entry. The
kernel maps a library's code from its file in 4 KiB pages (huge pages for read-only files need
a kernel built with ``CONFIG_READ_ONLY_THP_FOR_FS``), so the worker, before it confines
itself, copies the 2 MiB-aligned part of the interpreter library's read-only mappings
(headers, code, constants) into anonymous memory, has the kernel collapse the copy into huge
pages (``MADV_COLLAPSE``, Linux 6.1+; before it, the copy's own page faults may have brought
huge pages, which ``/proc/self/smaps`` tells), and moves the copy over the original in one
``mremap`` call. The bytes at every address stay the same, so the code that runs during the
call (in the C library) and after it sees no change. The fork server and every child then
share the huge pages: a fork copies one entry per 2 MiB, and a child takes no page fault on
that code.

A huge page has one protection, so the moved range is readable and executable as a whole: the
library's headers and constants that share a 2 MiB page with its code become executable too.
Nothing becomes writable. A child that makes the range writable and writes to it gets its own
copy of what it writes, as it would of a file's private pages.

Only for speed, and best effort: nothing moves where the kernel's huge pages are off
(``transparent_hugepage/enabled`` says ``never``), where the library has no 2 MiB-aligned
read-only range, where the copy cannot be collapsed, or on any error; the library's own
mappings then stay as they were. The worker reports how many MiB moved (``huge_code_mib``).
A profiler that names code by its file (``perf``) sees the moved range as anonymous memory in
the worker, its fork server and its children.
"""

import collections
import ctypes
import errno
import os

HUGE_PAGE = 2 << 20  # the x86-64 and arm64 (4 KiB base pages) transparent huge page
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20
_MADV_HUGEPAGE, _MADV_COLLAPSE = 14, 25
_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2
_FAILED = ctypes.c_void_p(-1).value  # MAP_FAILED
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mremap.restype = ctypes.c_void_p
_libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                         ctypes.c_void_p]


# one line of /proc/<pid>/maps; ``file`` is the device and inode (None: anonymous memory),
# ``name`` the path or the kernel's name ([heap], [vdso]; "" for none)
Mapping = collections.namedtuple("Mapping", "start end perms offset file name")


def parse_maps(maps_text):
    """``/proc/<pid>/maps``'s lines as :class:`Mapping` rows (lines it cannot be are left
    out)."""
    rows = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        start, end = (int(part, 16) for part in fields[0].split("-"))
        inode = int(fields[4])
        rows.append(Mapping(start, end, fields[1], int(fields[2], 16),
                            (fields[3], inode) if inode else None,
                            fields[5].strip() if len(fields) > 5 else ""))
    return rows


def readonly_span(rows, anchor):
    """``(start, end)`` of the run of adjacent readable, unwritable, private mappings of the
    file that maps ``anchor`` (an address of its code), around it; ``None`` when ``anchor`` is
    in none such. A writable mapping (data), an inaccessible one (``---p``, the loader's
    padding), another file or a hole ends the run."""
    def fits(row):
        return row.perms[0] == "r" and row.perms[1] == "-" and row.perms[3] == "p" \
            and row.file is not None

    def joined(left, right):
        return fits(left) and fits(right) and left.file == right.file and left.end == right.start

    at = next((i for i, row in enumerate(rows) if row.start <= anchor < row.end), None)
    if at is None or not fits(rows[at]):
        return None
    first = last = at
    while first > 0 and joined(rows[first - 1], rows[first]):
        first -= 1
    while last + 1 < len(rows) and joined(rows[last], rows[last + 1]):
        last += 1
    return rows[first].start, rows[last].end


def aligned_part(start, end, size=HUGE_PAGE):
    """The largest ``size``-aligned ``(start, end)`` inside ``[start, end)``; ``None`` when it
    holds no whole aligned ``size``."""
    low, high = -(-start // size) * size, end // size * size
    return (low, high) if high > low else None


def thp_allowed(setting_text):
    """Whether ``transparent_hugepage/enabled``'s text leaves huge pages on (the chosen value
    is in brackets: ``always [madvise] never``)."""
    return "[never]" not in setting_text


def huge_kb(smaps_text, address):
    """``(start, end, AnonHugePages in kB)`` of the mapping holding ``address`` in
    ``/proc/<pid>/smaps``'s text; ``None`` when none holds it."""
    found = None
    for line in smaps_text.splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            low, high = (int(part, 16) for part in head.split("-"))
            found = (low, high) if low <= address < high else None
        elif found and line.startswith("AnonHugePages:"):
            return found + (int(line.split()[1]),)
    return None


def _all_huge(start, size):
    """Whether ``[start, start + size)`` is one mapping in huge pages entirely."""
    try:
        with open("/proc/self/smaps") as smaps:
            found = huge_kb(smaps.read(), start)
    except (OSError, ValueError):
        return False
    return found is not None and found[1] >= start + size and found[2] * 1024 >= size


def interpreter_anchor():
    """An address inside the interpreter's own code (libpython, or the executable when the
    interpreter is linked into it)."""
    return ctypes.cast(ctypes.pythonapi.Py_IncRef, ctypes.c_void_p).value


def move_code_to_huge_pages():
    """Move the interpreter library's 2 MiB-aligned read-only range into huge pages (see the
    module's docstring). Returns ``(bytes moved, why not)``: ``(0, reason)`` when nothing
    moved."""
    try:
        with open(THP_SETTING) as setting:
            if not thp_allowed(setting.read()):
                return 0, "transparent huge pages are off"
        with open("/proc/self/maps") as maps:
            span = readonly_span(parse_maps(maps.read()), interpreter_anchor())
    except (OSError, ValueError) as error:
        return 0, f"cannot read the memory map ({error})"
    part = aligned_part(*span) if span else None
    if part is None:
        return 0, "the interpreter's code holds no 2 MiB-aligned range"
    return _move(*part)


def _collapse(copy, size):
    """``None`` once ``[copy, copy + size)`` is in huge pages; else why it is not."""
    if _libc.madvise(copy, size, _MADV_COLLAPSE) == 0:
        return None
    error = ctypes.get_errno()
    # a kernel before 6.1 knows no MADV_COLLAPSE (EINVAL), but may have given the copy huge
    # pages at its first writes already
    if error == errno.EINVAL and _all_huge(copy, size):
        return None
    return f"the kernel did not collapse the copy ({os.strerror(error)})"


def _move(start, end):
    size = end - start
    # room for the copy at a 2 MiB boundary (where a huge page can go): one page more
    raw = _libc.mmap(None, size + HUGE_PAGE, _PROT_READ | _PROT_WRITE,
                     _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
    if raw in (None, _FAILED):
        return 0, f"no memory for the copy ({os.strerror(ctypes.get_errno())})"
    copy = -(-raw // HUGE_PAGE) * HUGE_PAGE
    if copy > raw:
        _libc.munmap(raw, copy - raw)
    _libc.munmap(copy + size, raw + HUGE_PAGE - copy)
    _libc.madvise(copy, size, _MADV_HUGEPAGE)
    ctypes.memmove(copy, start, size)
    why = _collapse(copy, size)
    if why is None and _libc.mprotect(copy, size, _PROT_READ | _PROT_EXEC) != 0:
        why = f"the copy cannot be made executable ({os.strerror(ctypes.get_errno())})"
    elif why is None and _libc.mremap(copy, size, size, _MREMAP_MAYMOVE | _MREMAP_FIXED,
                                      start) != start:
        why = f"the copy cannot replace the code ({os.strerror(ctypes.get_errno())})"
    if why is not None:  # the library's mappings are untouched; the copy goes
        _libc.munmap(copy, size)
        return 0, why
    return size, None
