"""The pages a fork server pins so that each fork copies them at once (sandbox_pinning): the
measurement of which pages probes write, the kernel's copy of pinned pages at the fork, a
worker whose fork server pins and whose children hold no ring, and grading that gives the
same rewards whether pages are pinned or not."""

import ctypes
import json
import mmap
import os
import resource
import socket
import subprocess
import sys
import time

import pytest

from sweet_rl.grading.decode import decode
from sweet_rl.grading.sandbox.client import SandboxWorker
from tests.conftest import colbench_file
from tests.grading.hostile_helpers import PROJECT, worker_processes

SANDBOX = os.path.join(PROJECT, "sweet_rl", "grading", "sandbox")
sys.path.insert(0, SANDBOX)
import sandbox_pinning as pinning  # noqa: E402
import sandbox_zygote as zygote  # noqa: E402

PAGE = pinning.PAGE


def test_the_private_writable_mappings_are_read_from_a_maps_text():
    text = "\n".join([
        "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]",
        "7f1e4c000000-7f1e4c100000 rw-p 00000000 00:00 0 ",
        "7f1e4d200000-7f1e4d204000 r--p 00000000 08:01 1234  /usr/lib/libc.so.6",
        "7f1e4d204000-7f1e4d206000 rw-p 00004000 08:01 1234  /usr/lib/libc.so.6",
        "7f1e4d300000-7f1e4d400000 rw-s 00000000 00:05 77                         /dev/shm/x",
        "7ffd1c7f8000-7ffd1c7fc000 rw-p 00000000 00:00 0                          [vvar]",
        "7ffd1c9e0000-7ffd1ca01000 rw-p 00000000 00:00 0                          [stack]",
        "garbage line",
    ])
    assert pinning.writable_ranges(text) == [
        (0x55d0c0a00000, 0x55d0c0a21000), (0x7f1e4c000000, 0x7f1e4c100000),
        (0x7f1e4d204000, 0x7f1e4d206000), (0x7ffd1c9e0000, 0x7ffd1ca01000)]


def test_a_page_counts_as_written_only_when_present_and_mapped_here_alone():
    present, exclusive = 1 << 63, 1 << 56
    words = b"".join(word.to_bytes(8, "little") for word in (
        present | exclusive | 1234,  # written: a private copy
        present,  # still shared
        exclusive,  # not present (swapped or never touched)
        0,
        present | exclusive))
    assert pinning.exclusive_pages(words, 100) == [100, 104]


def test_neighbouring_pages_make_one_span_and_the_most_written_come_first():
    assert pinning.spans([7, 3, 4, 5, 9, 4]) == [
        (3 * PAGE, 3 * PAGE), (7 * PAGE, PAGE), (9 * PAGE, PAGE)]
    counts = {10: 6, 11: 3, 12: 2, 13: 5, 14: 6}
    assert pinning.hot_pages(counts, rounds=6) == [10, 14, 13, 11]  # at least 3 of 6
    assert pinning.hot_pages(counts, rounds=6, most=2) == [10, 14]
    assert pinning.hot_pages(counts, rounds=6, share=1.0) == [10, 14]


def _buffer(pages):
    """An anonymous mapping of ``pages`` pages, every page touched: (mapping, first page)."""
    mapping = mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for index in range(pages):
        mapping[index * PAGE] = 1
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    return mapping, address // PAGE


def test_the_pages_a_probe_writes_are_found_in_the_pagemap():
    try:
        pagemap = pinning.PageMap(floor=3)
    except OSError as error:
        pytest.skip(f"no /proc/self/pagemap here: {error}")
    mapping, first = _buffer(32)
    written = (3, 10, 20)

    def start_probe(_round):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                for index in written:
                    mapping[index * PAGE + 1] = 2
                theirs.send(b"D")
                theirs.recv(1)
            finally:
                os._exit(0)
        theirs.close()
        return pid, ours

    try:
        counts = pinning.measure(pagemap, start_probe, rounds=3, wait=10)
    finally:
        pagemap.close()
    ours = {page - first: count for page, count in counts.items() if first <= page < first + 32}
    assert ours == {index: 3 for index in written}


def test_a_probe_that_never_reports_fails_the_measurement_and_is_killed():
    try:
        pagemap = pinning.PageMap(floor=3)
    except OSError as error:
        pytest.skip(f"no /proc/self/pagemap here: {error}")
    started = []

    def start_probe(_round):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                theirs.recv(1)  # never says it is done
            finally:
                os._exit(0)
        theirs.close()
        started.append(pid)
        return pid, ours

    try:
        assert pinning.measure(pagemap, start_probe, rounds=2, wait=0.5) is None
    finally:
        pagemap.close()
    assert len(started) == 1  # the second round never started
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(started[0], os.WNOHANG)


def _pinned_or_skip(pages):
    ring, why = pinning.make_ring()
    if ring < 0:
        pytest.skip(f"the kernel refuses to pin pages here: {why}")
    pinned, why = pinning.register(ring, pages)
    if not pinned:
        os.close(ring)
        pytest.skip(f"the kernel refuses to pin pages here: {why}")
    return ring, pinned


def _vm_pin_kb():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmPin:"):
                return int(line.split()[1])
    return 0


def test_a_pinned_page_is_copied_at_the_fork_not_at_the_first_write():
    mapping, first = _buffer(32)
    before = _vm_pin_kb()
    ring, pinned = _pinned_or_skip(list(range(first, first + 16)))
    assert pinned == 16
    try:
        assert _vm_pin_kb() - before == 16 * PAGE // 1024
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # faults for writing shared pages (which warms the loop up), the 16
            try:       # pinned ones, then shared ones again
                faults = []
                for pages in (range(16, 24), range(16), range(24, 32)):
                    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                    for index in pages:
                        mapping[index * PAGE + 1] = 7
                    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
                os.write(write, json.dumps(faults).encode())
            finally:
                os._exit(0)
        os.close(write)
        faults = json.loads(os.read(read, 100))
        os.close(read)
        os.waitpid(pid, 0)
    finally:
        os.close(ring)
    _warming, pinned_faults, shared_faults = faults
    assert pinned_faults <= 2 and shared_faults >= 8, faults
    assert all(mapping[index * PAGE + 1] == 0 for index in range(32))  # the copies were the child's
    deadline = time.monotonic() + 5  # closing the ring unpins (the kernel does it a bit later)
    while _vm_pin_kb() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _vm_pin_kb() == before


def test_the_fork_loop_run_here_refuses_while_a_childs_descriptor_is_taken():
    held = []
    try:
        while not held or held[-1] < zygote.FIRST_CHILD_FD + 1:  # 3 and 4 are taken
            held.append(os.open(os.devnull, os.O_RDONLY))
        with pytest.raises(OSError, match="in use"):
            zygote.serve_once(lambda parent: os._exit(0), [held[-1]])
    finally:
        for fd in held:
            os.close(fd)


# an answer's view of its descriptors and of io_uring
DESCRIPTORS = """
import ctypes, os
def open_descriptors():
    found = []
    for fd in range(1024):
        try:
            os.fstat(fd)
            found.append(fd)
        except OSError:
            pass
    return found
def ring():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(ctypes.c_long(425), ctypes.c_uint(1), params)
    return fd if fd >= 0 else os.strerror(ctypes.get_errno())
"""


def _pinned_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith("VmPin:")), 0)
    except OSError:
        return 0


def test_probes_run_the_graders_rule_set_or_each_in_turn():
    from sweet_rl.grading.grader import RULES

    assert pinning.RULE_SETS == RULES  # the sandbox's names are the grader's
    rounds = range(pinning.ROUNDS)
    assert {pinning.probe_rules(r, "strict") for r in rounds} == {"strict"}
    assert {pinning.probe_rules(r, "benchmark") for r in rounds} == {"benchmark"}
    for unknown in (None, "", "lenient"):
        assert [pinning.probe_rules(r, unknown) for r in range(4)] == [
            "benchmark", "strict", "benchmark", "strict"]


def test_a_worker_refuses_a_rule_set_it_does_not_know(tmp_path):
    worker = os.path.join(SANDBOX, "sandbox_worker.py")
    found = subprocess.run([sys.executable, "-S", worker, "--slot", "0", "--scratch",
                            str(tmp_path), "--rules", "lenient"],
                           capture_output=True, text=True, timeout=60)
    assert found.returncode != 0
    assert "usage: sandbox_worker.py" in found.stderr and "lenient" in found.stderr
    assert os.listdir(tmp_path) == []  # refused before it made anything


def test_a_worker_without_a_memory_cgroup_still_gets_the_rule_set(tmp_path, monkeypatch,
                                                                   caplog):
    from sweet_rl.grading.sandbox import client

    monkeypatch.setattr(client.sandbox_memory, "create", lambda name, mb: (None, "none here"))
    with caplog.at_level("DEBUG", logger=client.__name__):
        with SandboxWorker(0, str(tmp_path), rules="benchmark") as worker:
            command = worker._command
            assert worker.run("def f():\n    return 2\n", ["f()"], "benchmark", 5.0, 256) == [
                ["ok", "2"]]
    assert "--cgroup" not in command
    assert command[command.index("--rules") + 1] == "benchmark"
    assert "no memory cgroup (none here)" in caplog.text


def test_the_fork_server_pins_pages_and_no_child_holds_its_ring(tmp_path):
    # its probes run the strict rules, as its jobs do
    with SandboxWorker(0, str(tmp_path), rules="strict") as worker:
        assert worker._command[worker._command.index("--rules") + 1] == "strict"
        assert ("--cgroup" in worker._command) == bool(worker.cgroup)
        results = worker.run(DESCRIPTORS, ["open_descriptors()", "ring()"], "strict", 5.0, 512)
        if worker.pinned_pages == 0:
            ring, why = pinning.make_ring()
            if ring < 0:
                pytest.skip(f"this kernel makes no io_uring here: {why}")
            os.close(ring)
            if os.geteuid() != 0:  # other workers of this user may hold the locked memory
                pytest.skip("the fork server pinned nothing (its user's locked memory in use?)")
            pytest.fail("the fork server pinned nothing, where a ring can be made")
        # the pinned pages are counted to the process that made the ring (the worker)
        pinned_kb = max(_pinned_kb(pid) for pid in worker_processes(str(tmp_path)))
    assert 16 <= worker.pinned_pages <= pinning.MAX_PAGES
    assert pinned_kb == worker.pinned_pages * PAGE // 1024
    assert [(status, decode(value)) for status, value in results] == [
        ("ok", [0, 1, 2, 3, 4]), ("ok", "Operation not permitted")]


# a small batch of real tasks, graded in a process that may lock no memory (nothing pinned)
GRADE_UNPINNED = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
from sweet_rl.grading.grader import Grader
items = json.load(sys.stdin)
grader = Grader("benchmark", timeout=1.0, workers=1)
rewards = [result.reward for result in grader.grade(items)]
print(json.dumps({"rewards": rewards, "pinned": grader.pinned_pages}))
"""


def test_rewards_are_the_same_with_pages_pinned_and_without():
    from sweet_rl.grading.grader import Grader

    with open(colbench_file("backend_test.jsonl")) as handle:
        tasks = [json.loads(line) for _, line in zip(range(40), handle)]
    # the references as answers, and answers that are wrong in the same tasks
    items = [(task["ground_truth"], task["ground_truth"], task["test_cases"]) for task in tasks]
    items += [("def nothing():\n    return None\n", task["ground_truth"], task["test_cases"])
              for task in tasks[:10]]
    grader = Grader("benchmark", timeout=1.0, workers=1)
    pinned = [result.reward for result in grader.grade(items)]
    found = subprocess.run([sys.executable, "-c", GRADE_UNPINNED], input=json.dumps(items),
                           capture_output=True, text=True, cwd=PROJECT, check=True)
    unpinned = json.loads(found.stdout.strip().splitlines()[-1])
    assert unpinned["pinned"] == {"0": 0}
    if grader.pinned_pages[0] == 0:
        pytest.skip("the kernel refuses to pin pages here: both runs were unpinned")
    # tasks 264 and 741 of the file disagree with themselves from run to run; neither is here
    assert pinned == unpinned["rewards"]
    assert sum(pinned[:40]) >= 38 and sum(pinned[40:]) == 0
