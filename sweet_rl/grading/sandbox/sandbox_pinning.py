"""The pages every child writes, copied by the kernel when the child is forked.

Loaded by path by :mod:`sandbox_worker` (stdlib and ctypes only). A child shares all of its
fork server's pages copy-on-write, and CPython 3.11 writes to every object it touches
(reference counts), so a fresh child's first write to each of some 250-300 shared pages traps
into the kernel, which copies the page then: about 2 µs a page on the 2-core development
machine, more than half of what a child costs beyond its own work. Linux (5.9 and later)
copies a page that is pinned for I/O at the fork instead, in one pass and without a trap per
page. So the fork server pins the pages its children nearly always write, with an io_uring
buffer registration that it never uses for any I/O, and each child starts with its own copies
of them; the fork server's own writes to them after a fork trap no more either.

Which pages is measured once per worker as it starts, after Landlock (its descriptors on
``/proc/self`` were opened before: under Landlock nothing in ``/proc`` opens) and before its
pid namespace (whose first process must be the fork server) and its privilege drop: probes
forked through the fork server's own loop, run in the worker
(:func:`sandbox_zygote.serve_once`), run a trusted job through a child's own entry, under the
rule set the grader uses when the worker knows it; a page of
the worker that is no longer shared while a probe lives (``/proc/self/pagemap``: "exclusively
mapped") was written by one side or the other. Pages written in at least half of the probes are
pinned, the most written first, as many as the locked-memory limit allows (at most
:data:`MAX_PAGES`). Where the kernel refuses any of it (no pagemap, io_uring disabled, no
locked memory allowed) nothing is pinned and children copy pages on first write; no layer of
the sandbox depends on this. The worker makes the ring before it drops its privileges
(:func:`make_ring`), the fork server registers the pages. The ring's descriptor sits above the
children's channels, every child closes it before its job comes, and the seccomp filter refuses
every io_uring call to the fork server (once it is set up) and to the children.
"""

import ctypes
import os
import resource
import select
import signal
import struct
import time

import _socket

import sandbox_zygote as zygote
from sandbox_child import NONCE_LENGTH, RESULT_FD, RULE_SETS, job_header, text_line
from sandbox_hugetext import parse_maps
from sandbox_limits import SETUP_LIMIT

PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_PAGES = 2048  # 8 MiB of copies per fork at most
SHARE = 0.5  # a page is pinned when at least this share of the probes wrote it
ROUNDS = 6  # probes (see probe_rules)
# io_uring's calls have the same numbers on every Linux architecture (since 5.1)
_IO_URING_SETUP, _IO_URING_REGISTER, _REGISTER_BUFFERS = 425, 427, 0
_PARAMS_SIZE = 120  # sizeof(struct io_uring_params)
_PRESENT, _EXCLUSIVE = 1 << 63, 1 << 56  # pagemap bits: page present; mapped here alone
# the probes' job: trusted, and doing what the backend tasks' functions commonly do (records
# in dicts, a loop, string methods, sorting with a key, a comprehension, float arithmetic and
# rounding, an exception caught); a failing test and a comparing one
PROBE_CODE = (
    "def summarize(records, threshold=0.5, label='total'):\n"
    "    counts, scores = {}, []\n"
    "    for index, record in enumerate(records):\n"
    "        if not isinstance(record, dict):\n"
    "            continue\n"
    "        name = str(record.get('name', '')).strip().lower()\n"
    "        counts[name] = counts.get(name, 0) + 1\n"
    "        scores.append(float(record.get('score', 0)) * (index + 1))\n"
    "    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))\n"
    "    kept = [score for score in scores if score >= threshold]\n"
    "    try:\n"
    "        mean = round(sum(kept) / len(kept), 2)\n"
    "    except ZeroDivisionError:\n"
    "        mean = None\n"
    "    words = ' '.join(name.upper() for name, _ in ranked).split()\n"
    "    return {label: len(records), 'names': [n for n, _ in ranked], 'mean': mean,\n"
    "            'best': max(scores, default=0), 'tags': tuple(sorted(set(words))),\n"
    "            'text': f'{label}: {mean}', 'ok': mean is not None and mean > 1}\n")
PROBE_TESTS = (
    "summarize([{'name': 'Ann', 'score': 3}, {'name': 'bob ', 'score': 1.5}, 'x'])",
    "summarize([], label='none') == {'none': 0}",
    "summarize([{'name': 'Ann'}], threshold=2.5)['mean']",
    "summarize(None)",
    "len(summarize([{'name': str(i), 'score': i} for i in range(20)])['names'])",
)


def writable_ranges(maps_text):
    """``[(start, end)]`` of the private writable mappings in ``/proc/<pid>/maps``'s text,
    less the kernel's own ([vvar], [vdso], [vsyscall])."""
    return [(row.start, row.end) for row in parse_maps(maps_text)
            if row.perms[:2] == "rw" and row.perms[3] == "p"
            and row.name not in ("[vvar]", "[vdso]", "[vsyscall]", "[vvar_vclock]")]


def exclusive_pages(words, first_page):
    """The page numbers, counting from ``first_page``, whose pagemap ``words`` (8 bytes each,
    little-endian) say present and mapped by this process alone."""
    pages = []
    for offset, (word,) in enumerate(struct.iter_unpack("<Q", words)):
        if word & _PRESENT and word & _EXCLUSIVE:
            pages.append(first_page + offset)
    return pages


def spans(pages):
    """``[(address, length)]`` covering the page numbers ``pages``, neighbours merged."""
    runs = []
    for page in sorted(set(pages)):
        if runs and runs[-1][0] + runs[-1][1] == page:
            runs[-1][1] += 1
        else:
            runs.append([page, 1])
    return [(page * PAGE, count * PAGE) for page, count in runs]


def hot_pages(counts, rounds, share=SHARE, most=MAX_PAGES):
    """The page numbers written in at least ``share`` of ``rounds`` probes (``counts``: page
    number -> probes that wrote it), the most written first, at most ``most``."""
    hot = [page for page, count in counts.items() if count >= share * rounds]
    return sorted(hot, key=lambda page: (-counts[page], page))[:most]


class PageMap:
    """This process's ``/proc/self/maps`` and ``/proc/self/pagemap``, opened before Landlock
    (which checks a file when it is opened, not when it is read), above ``floor``: the low
    descriptors are where a child's channels go. Raises OSError."""

    def __init__(self, floor=zygote.HIGH_FD):
        self.maps = zygote.above(os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC), floor)
        try:
            self.pagemap = zygote.above(
                os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC), floor)
        except OSError:
            os.close(self.maps)
            raise

    def ranges(self):
        os.lseek(self.maps, 0, os.SEEK_SET)
        chunks = []
        while True:
            chunk = os.read(self.maps, 1 << 16)
            if not chunk:
                return writable_ranges(b"".join(chunks).decode("ascii", "replace"))
            chunks.append(chunk)

    @staticmethod
    def buffers(ranges):
        """Room for the pagemap words of ``ranges``, made before a probe is forked: reading
        into it afterwards writes next to nothing else of this process."""
        return [bytearray((end - start) // PAGE * 8) for start, end in ranges]

    def exclusive(self, ranges, buffers):
        """The pages of ``ranges`` mapped by this process alone (``buffers`` from
        :meth:`buffers`)."""
        for (start, _end), buffer in zip(ranges, buffers):
            os.preadv(self.pagemap, [buffer], start // PAGE * 8)
        pages = []
        for (start, _end), buffer in zip(ranges, buffers):
            pages += exclusive_pages(buffer, start // PAGE)
        return pages

    def close(self):
        os.close(self.maps)
        os.close(self.pagemap)


def measure(pagemap, start_probe, rounds=ROUNDS, wait=SETUP_LIMIT):
    """Page number -> how many of ``rounds`` probes wrote it; None when a probe failed.

    ``start_probe(round)`` forks a probe and returns ``(pid, socket)``: the probe sends
    ``b"D"`` on the socket once it has run its job and then waits, holding its copies, until
    the socket closes. Each probe gets ``wait`` seconds; it is killed and reaped in any case.
    """
    counts = {}
    for round_ in range(rounds):
        ranges = pagemap.ranges()
        buffers = pagemap.buffers(ranges)
        pid, sock = start_probe(round_)
        deadline = time.monotonic() + wait
        pidfd = os.pidfd_open(pid)
        try:
            packet = None
            while packet not in (b"D", b""):  # its records come first
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                packet = sock.recv(1 << 16)
            written = pagemap.exclusive(ranges, buffers) if packet == b"D" else None
        except OSError:
            written = None
        finally:
            sock.close()
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:  # it has ended already
                pass
            select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()) + 1)
            os.close(pidfd)
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if written is None:
            return None
        for page in written:
            counts[page] = counts.get(page, 0) + 1
    return counts


def probe_rules(round_, rules=None):
    """The rule set probe ``round_`` runs under: ``rules``, the one the grader will send
    (a page that only the other set's harness writes would be pinned and copied at every
    fork for nothing), or, not knowing it, each set in turn."""
    return rules if rules in RULE_SETS else RULE_SETS[round_ % 2]


def start_probe(entry, round_, rules=None):
    """Fork a probe for :func:`measure` through the fork server's loop, run here (the
    calling worker has no fork server yet): ``entry(parent)`` runs in the probe, on the probe
    job under :func:`probe_rules`, and ends with :func:`probe_done`. Returns ``(pid, this
    side of its result socket)``; raises OSError."""
    task = {"code": PROBE_CODE, "count": len(PROBE_TESTS), "start": 0,
            "rules": probe_rules(round_, rules), "timeout": SETUP_LIMIT,
            "memory_mb": 2048, "nonce": "0" * NONCE_LENGTH}
    job_ours, job_theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    # the probe's ends where no child's descriptor goes: they must land at 3 and 4
    ends = [zygote.above(end.detach(), zygote.HIGH_FD) for end in (theirs, job_theirs)]
    try:
        job_ours.sendall(job_header(task) + b"".join(map(text_line, PROBE_TESTS)))
        job_ours.close()  # the probe's harness ends after the last test
        pid, pidfd = zygote.serve_once(entry, ends)
        os.close(pidfd)
    except OSError:
        ours.close()
        raise
    finally:
        job_ours.close()
        for fd in ends:
            os.close(fd)
    return pid, ours


def probe_done():
    """The end of a probe's entry: say so, then hold its copies until the worker hangs up."""
    os.write(RESULT_FD, b"D")
    os.read(RESULT_FD, 1)


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def make_ring():
    """An io_uring instance that is only ever used to pin pages: ``(descriptor, None)``, or
    ``(-1, why)`` where the kernel refused. Whether what it pins counts against its user's
    locked-memory limit is settled here: not when the caller may lock memory at will
    (CAP_IPC_LOCK, as root before the worker drops its privileges), so that every worker's fork
    server can pin, however many run."""
    ring = _libc.syscall(ctypes.c_long(_IO_URING_SETUP), ctypes.c_uint(1),
                         ctypes.create_string_buffer(_PARAMS_SIZE))
    if ring < 0:
        return -1, f"io_uring_setup: {os.strerror(ctypes.get_errno())}"
    return ring, None


def register(ring, pages):
    """Pin ``pages`` (page numbers of the calling process, the most wanted first) for as long
    as ``ring`` lives, no more than the locked-memory limit (whether or not the ring counts
    them against it; the soft limit is raised to the hard one first, which needs no privilege):
    ``(how many, None)``, or ``(0, why)`` where the kernel refused."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY:
        pages = pages[:max(0, soft // PAGE - 16)]  # room for the ring's own pages
    if not pages:
        return 0, "no pages (or no locked memory allowed)"
    pieces = spans(pages)
    vectors = (_IOVec * len(pieces))(*(_IOVec(address, length) for address, length in pieces))
    if _libc.syscall(ctypes.c_long(_IO_URING_REGISTER), ctypes.c_uint(ring),
                     ctypes.c_uint(_REGISTER_BUFFERS), vectors, ctypes.c_uint(len(pieces))) < 0:
        return 0, f"registering {len(pages)} pages: {os.strerror(ctypes.get_errno())}"
    return len(pages), None
