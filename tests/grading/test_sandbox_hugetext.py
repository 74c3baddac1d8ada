"""The interpreter's code moved into huge pages before a worker forks (sandbox_hugetext): the
range chosen from a maps text, the move in a real interpreter (same bytes, huge pages, the
interpreter and its forks still working), the way back when the kernel refuses, and a worker
whose fork server and children share the pages while a child's writes to them stay its own."""

import json
import os
import platform
import subprocess
import sys

import pytest

from sweet_rl.grading.decode import decode
from sweet_rl.grading.sandbox.client import SandboxWorker
from tests.grading.hostile_helpers import PROJECT, worker_processes

SANDBOX = os.path.join(PROJECT, "sweet_rl", "grading", "sandbox")
sys.path.insert(0, SANDBOX)
import sandbox_hugetext as hugetext  # noqa: E402

MIB = 1 << 20
LIBRARY = [  # a shared library as the loader maps it, 2 MiB-aligned, then its neighbours
    "7f0000000000-7f00000f5000 r--p 00000000 fe:00 26933   /opt/lib/libpython3.11.so",
    "7f00000f5000-7f0000331000 r-xp 000f5000 fe:00 26933   /opt/lib/libpython3.11.so",
    "7f0000331000-7f0000415000 r--p 00331000 fe:00 26933   /opt/lib/libpython3.11.so",
    "7f0000415000-7f0000444000 r--p 00414000 fe:00 26933   /opt/lib/libpython3.11.so",
    "7f0000444000-7f0000578000 rw-p 00443000 fe:00 26933   /opt/lib/libpython3.11.so",
    "7f0000578000-7f000057a000 r--p 00000000 fe:00 4711    /opt/lib/libother.so",
    "7f0000600000-7f0000a00000 r-xp 00000000 00:00 0 ",
]


def test_the_read_only_run_of_the_file_around_the_code_is_chosen():
    rows = hugetext.parse_maps("\n".join(LIBRARY + ["garbage"]))
    assert len(rows) == len(LIBRARY)
    assert rows[0].file == ("fe:00", 26933) and rows[0].name == "/opt/lib/libpython3.11.so"
    assert rows[-1].file is None and rows[-1].name == ""
    code = 0x7F0000100000
    # headers, code, constants, relocated constants; not the data, not the next file
    assert hugetext.readonly_span(rows, code) == (0x7F0000000000, 0x7F0000444000)
    assert hugetext.aligned_part(0x7F0000000000, 0x7F0000444000) == (
        0x7F0000000000, 0x7F0000400000)
    assert hugetext.readonly_span(rows, 0x7F0000450000) is None  # in the writable data
    assert hugetext.readonly_span(rows, 0x7F0000700000) is None  # anonymous memory
    assert hugetext.readonly_span(rows, 0x7F00005F0000) is None  # in no mapping


def _span_with(index, line, anchor=0x7F0000100000):
    """The read-only span around ``anchor`` in ``LIBRARY`` with its line ``index`` replaced."""
    lines = list(LIBRARY)
    lines[index] = line
    return hugetext.readonly_span(hugetext.parse_maps("\n".join(lines)), anchor)


def test_padding_a_hole_or_another_file_ends_the_run():
    padded = "7f0000331000-7f0000415000 ---p 00331000 fe:00 26933   /opt/lib/libpython3.11.so"
    assert _span_with(2, padded) == (0x7F0000000000, 0x7F0000331000)
    holed = "7f00000f6000-7f0000331000 r-xp 000f6000 fe:00 26933   /opt/lib/libpython3.11.so"
    assert _span_with(1, holed) == (0x7F00000F6000, 0x7F0000444000)
    other = "7f0000000000-7f00000f5000 r--p 00000000 fe:00 99   /opt/lib/libpython3.11.so"
    assert _span_with(0, other) == (0x7F00000F5000, 0x7F0000444000)
    shared = "7f00000f5000-7f0000331000 r-xs 000f5000 fe:00 26933   /opt/lib/libpython3.11.so"
    assert _span_with(1, shared) is None


def test_only_whole_aligned_huge_pages_are_moved():
    assert hugetext.aligned_part(0x1000, 0x400000) == (0x200000, 0x400000)
    assert hugetext.aligned_part(0x200000, 0x600000) == (0x200000, 0x600000)
    assert hugetext.aligned_part(0x1000, 0x3FF000) is None  # 4 MiB less two pages, astride
    assert hugetext.aligned_part(0x201000, 0x400000) is None
    assert hugetext.thp_allowed("always [madvise] never\n")
    assert hugetext.thp_allowed("[always] madvise never")
    assert not hugetext.thp_allowed("always madvise [never]\n")


def test_the_huge_pages_of_the_mapping_holding_an_address_are_read_from_smaps():
    text = "\n".join([
        "7f0000000000-7f0000400000 r-xp 00000000 00:00 0 ",
        "Size:               4096 kB",
        "AnonHugePages:      4096 kB",
        "VmFlags: rd ex mr mw me hg",
        "7f0000400000-7f0000444000 r--p 00400000 fe:00 26933   /opt/lib/libpython3.11.so",
        "Size:                272 kB",
        "AnonHugePages:         0 kB",
    ])
    assert hugetext.huge_kb(text, 0x7F0000000000) == (0x7F0000000000, 0x7F0000400000, 4096)
    assert hugetext.huge_kb(text, 0x7F00003FFFFF)[2] == 4096
    assert hugetext.huge_kb(text, 0x7F0000400000) == (0x7F0000400000, 0x7F0000444000, 0)
    assert hugetext.huge_kb(text, 0x7F0000444000) is None


# run in a fresh interpreter: the move, then what it left and whether the interpreter works
MOVE = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
import sandbox_hugetext as hugetext
if sys.argv[2] == "off":  # PR_SET_THP_DISABLE: this process may have no huge pages
    ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)
if sys.argv[3] == "old":  # as on a kernel before 6.1: no such advice (EINVAL)
    hugetext._MADV_COLLAPSE = 9999

def lines():
    with open("/proc/self/maps") as handle:
        return handle.read().splitlines()

anchor = hugetext.interpreter_anchor()
before = lines()
span = hugetext.readonly_span(hugetext.parse_maps("\n".join(before)), anchor)
part = hugetext.aligned_part(*span) if span else None
moved, why = hugetext.move_code_to_huge_pages()
after = lines()
# the bytes now at each address of the range against the file's bytes there
same = True
for row in hugetext.parse_maps("\n".join(before)) if moved else []:
    low, high = max(row.start, part[0]), min(row.end, part[1])
    if low < high:
        with open(row.name, "rb") as library:
            library.seek(row.offset + low - row.start)
            same = same and library.read(high - low) == ctypes.string_at(low, high - low)
with open("/proc/self/smaps") as handle:
    found = hugetext.huge_kb(handle.read(), part[0]) if part else None
huge_kb = found[2] if found and found[:2] == tuple(part) else None
# the interpreter goes on: imports, compiles and runs code, forks a child that does too
import decimal, fractions, re
work = [str(decimal.Decimal(1) / 7), str(fractions.Fraction(3, 9)), re.sub("b+", "-", "abbbc"),
        eval(compile("sum(i * i for i in range(100))", "<x>", "eval"))]
pid = os.fork()
if pid == 0:
    os._exit(len(json.dumps(sorted({"z": 1, "a": [2.5, None]}.items()))))
status = os.waitpid(pid, 0)[1]
print(json.dumps({"moved": moved, "why": why, "part": part, "same": same, "huge_kb": huge_kb,
                  "before": before, "after": after, "work": work,
                  "child": os.waitstatus_to_exitcode(status)}))
"""
WORK = ["0.1428571428571428571428571429", "1/3", "a-c", 328350]
CHILD = len(json.dumps(sorted({"z": 1, "a": [2.5, None]}.items())))


def _move(mode, kernel="new"):
    found = subprocess.run([sys.executable, "-S", "-c", MOVE, SANDBOX, mode, kernel],
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    return json.loads(found.stdout)


def _file_mappings(lines):
    """The lines of a maps text that map a file."""
    return [line for line in lines if line.split()[4] != "0"]


def _skip_where_the_kernel_cannot(found):
    """``found``, or a skip where this machine cannot have the move (saying why)."""
    why = found["why"] or ""
    kernel = tuple(int(part) for part in platform.release().split(".")[:2] if part.isdigit())
    if why.startswith(("transparent huge pages are off", "the interpreter's code holds no")) \
            or ("did not collapse" in why and kernel < (6, 1)):
        pytest.skip(f"no huge pages for the interpreter's code here: {why}")
    return found


@pytest.mark.parametrize("kernel", ["new", "old"])
def test_the_code_moves_into_huge_pages_with_the_same_bytes_and_the_interpreter_runs_on(kernel):
    # "old": no MADV_COLLAPSE; the copy's faults bring the huge pages (THP's "madvise" or
    # "always" setting with a defrag setting that lets a fault wait for one)
    found = _move("on", kernel)
    if kernel == "old" and found["why"] and "did not collapse" in found["why"]:
        with open("/sys/kernel/mm/transparent_hugepage/defrag") as handle:
            defrag = handle.read()
        if "[madvise]" not in defrag and "[always]" not in defrag:
            pytest.skip(f"a fault does not wait for a huge page here: {defrag.strip()}")
    found = _skip_where_the_kernel_cannot(found)
    start, end = found["part"]
    assert (found["moved"], found["why"]) == (end - start, None)
    assert found["moved"] >= 2 * MIB and found["same"]
    assert found["huge_kb"] == found["moved"] // 1024  # all of it in huge pages
    # one anonymous, read-and-execute mapping where the file's mappings were; no other file
    # mapping changed
    moved = [line for line in found["after"] if line.startswith(f"{start:x}-{end:x} ")]
    assert len(moved) == 1 and moved[0].split()[1] == "r-xp" and moved[0].split()[4] == "0"
    untouched = [line for line in _file_mappings(found["before"])
                 if int(line.split("-")[0], 16) >= end or int(line.split()[0].split("-")[1], 16)
                 <= start]
    assert untouched and set(untouched) <= set(_file_mappings(found["after"]))
    assert found["work"] == WORK and found["child"] == CHILD


@pytest.mark.parametrize("kernel", ["new", "old"])
def test_nothing_moves_where_the_kernel_refuses_huge_pages(kernel):
    found = _move("off", kernel)
    assert found["moved"] == 0 and found["why"]
    # the files' mappings as they were (the heap may have grown)
    assert _file_mappings(found["before"]) == _file_mappings(found["after"])
    assert found["work"] == WORK and found["child"] == CHILD


# a job that makes the first page of the shared code writable and writes to it, and one that
# reads it: a child's write stays in that child
OVERWRITE = """
def overwrite(address):
    import ctypes  # here: the benchmark's rules run the code with separate locals
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(address, 4096, 7) != 0:
        return 'refused'
    ctypes.memmove(address, b'XXXX', 4)
    return ctypes.string_at(address, 4).decode('latin-1')
def read(address):
    import ctypes
    return ctypes.string_at(address, 4).decode('latin-1')
"""


def _huge_code(pid, size):
    """``(start, AnonHugePages in kB)`` of ``pid``'s anonymous read-and-execute mapping of
    ``size`` bytes; ``(None, None)`` when it has none."""
    with open(f"/proc/{pid}/maps") as handle:
        rows = hugetext.parse_maps(handle.read())
    start = next((row.start for row in rows if row.perms == "r-xp" and row.file is None
                  and row.end - row.start == size), None)
    if start is None:
        return None, None
    with open(f"/proc/{pid}/smaps") as handle:
        return start, hugetext.huge_kb(handle.read(), start)[2]


@pytest.mark.parametrize("rules", ["benchmark", "strict"])
def test_a_workers_children_share_the_huge_code_and_keep_their_writes_to_it(tmp_path, rules):
    found = _skip_where_the_kernel_cannot(_move("on"))
    size = found["moved"]
    with SandboxWorker(0, str(tmp_path), rules=rules) as worker:
        assert worker.huge_code_mib == size // MIB
        # the worker and its fork server (every child is the fork server's): one range, at
        # one address, all of it in huge pages
        processes = worker_processes(str(tmp_path))
        assert len(processes) >= 2
        assert len({_huge_code(pid, size) for pid in processes}) == 1
        start, huge_kb = _huge_code(processes[0], size)
        assert start is not None and huge_kb == size // 1024
        runs = [worker.run(OVERWRITE, [call], rules, 5.0, 512)
                for call in (f"read({start})", f"overwrite({start})", f"read({start})")]
        honest = worker.run("def f(x):\n    return x * 2\n", ["f(21)"], rules, 5.0, 512)
    (before,), (written,), (after,) = ([(status, decode(value)) for status, value in run]
                                       for run in runs)
    # the child's write went to its own copy: the next child reads the shared bytes again
    assert before[0] == "ok" and len(before[1]) == 4 and before[1] != "XXXX"
    assert written == ("ok", "XXXX") and after == before
    assert [(status, decode(value)) for status, value in honest] == [("ok", 42)]
