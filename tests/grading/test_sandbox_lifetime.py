"""How long the worker's processes live and what the worker waits for: nothing a child writes
or does stalls the worker or ends it, no child outlives it, and no job (a reference's included)
leaves anything in a process for the next one. The payloads are the adversarial fixture's
(tests/fixtures/adversarial_answers.jsonl), run here on one worker so each check is exact."""

import decimal
import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from sweet_rl.grading.code_extraction import extract_code
from sweet_rl.grading.sandbox.client import SandboxWorker
from tests.grading.hostile_helpers import PROJECT, load_rows, make_scratch_root, worker_processes

SANDBOX = os.path.join(PROJECT, "sweet_rl", "grading", "sandbox")
ROWS = {row["name"]: row for row in load_rows()}


def code_of(name):
    return extract_code(ROWS[name]["answer"])


def expressions_of(name):
    return list(ROWS[name]["test_cases"].values())


@pytest.fixture
def scratch():
    path = make_scratch_root()
    yield path
    subprocess.run(["rm", "-rf", path], check=False)


def test_a_reply_line_is_read_whole_however_it_is_cut():
    # the grading process reads a reply in pieces, each searched for the newline once
    read_fd, write_fd = os.pipe()
    reader = SandboxWorker.__new__(SandboxWorker)
    reader.process = SimpleNamespace(stdout=os.fdopen(read_fd, "rb", buffering=0))
    reader._buffer = []
    data = b"A" * 3_000_000 + b"\nshort\n" + b"B" * 10 + b"\nno end"

    def write():
        sizes, at = [1, 7, 65536, 1 << 20, 3], 0
        while at < len(data):
            size = sizes[at % len(sizes)]
            os.write(write_fd, data[at:at + size])
            at += size
        os.close(write_fd)

    writer = threading.Thread(target=write)
    writer.start()
    lines = [reader._read_line(30) for _ in range(4)]
    writer.join()
    reader.process.stdout.close()
    assert lines == [b"A" * 3_000_000, b"short", b"B" * 10, None]  # "no end" never ends


def test_an_empty_packet_or_a_hung_up_socket_is_never_taken_for_the_childs_end(scratch):
    with SandboxWorker(0, scratch) as worker:
        pid = worker.process.pid
        results = worker.run(code_of("fake_end_of_stream"), expressions_of("fake_end_of_stream"),
                             "strict", 2.0, 512)
        assert worker.refused == 3  # the three empty packets
        assert worker.process.pid == pid  # no restart
    assert [status for status, _ in results] == ["ok", "crash", "crash"]
    assert results[0][1] == "2"


def test_a_child_can_neither_reopen_nor_write_its_job_channel(scratch):
    with SandboxWorker(0, scratch) as worker:
        results = worker.run(code_of("reopen_job_channel"), ["double(1)", "double(2)"],
                             "strict", 2.0, 512)
    assert results == [["ok", "2"], ["ok", "4"]]  # nothing took: the answer says so


def test_a_record_nested_deep_is_refused_and_the_worker_lives_on(scratch):
    with SandboxWorker(0, scratch) as worker:
        pid = worker.process.pid
        results = worker.run(code_of("orphan_maker"), ["double(1)", "double(2)"], "strict",
                             5.0, 512)
        assert worker.process.pid == pid and worker.refused == 2
    # 2 * x: the prctl that would clear its parent death signal was refused
    assert results == [["ok", "2"], ["ok", "4"]]


SLEEPER = ("def nap():\n    import ctypes, time\n"
           "    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n    time.sleep(60)\n")


@pytest.mark.parametrize("who", ["worker", "zygote"])
def test_no_child_outlives_its_worker_or_its_fork_server(scratch, who):
    worker = SandboxWorker(0, scratch)
    try:
        worker.submit(SLEEPER, ["nap()"], "strict", 120.0, 512)
        deadline = time.monotonic() + 30
        while len(worker_processes(scratch)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the worker, its fork server and the sleeping child
        running = worker_processes(scratch)
        assert len(running) == 3, running
        if who == "worker":
            victim = worker.process.pid
        else:
            with open(f"/proc/{worker.process.pid}/task/{worker.process.pid}/children") as handle:
                victim = int(handle.read().split()[0])
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while set(worker_processes(scratch)) - {worker.process.pid} and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(worker_processes(scratch)) - {worker.process.pid} == set()
    finally:
        worker.process.kill()
        worker.close()
    assert worker_processes(scratch) == []


SHARE = ("def share(a, b):\n    import decimal, json\n"
         "    return [str(decimal.Decimal(a) / decimal.Decimal(b)), json.loads('[%d]' % a)]\n")


def test_a_reference_leaves_nothing_in_its_process_for_the_next_one(scratch):
    # the reference of one task changes its decimal context, json.loads, the harness's encoder
    # and leaves sleeping finalizers; the next task's reference runs in the same worker
    attack = ROWS["reference_changes_its_process"]
    expected = json.dumps(["l2", "'" + str(decimal.Decimal(1) / decimal.Decimal(7)), "l1", 1],
                          separators=(",", ":"))
    with SandboxWorker(0, scratch) as worker:
        first = worker.run(attack["ground_truth"], expressions_of("reference_changes_its_process"),
                           "benchmark", 10.0, 512, reference=True)
        started = time.monotonic()
        after = worker.run(SHARE, ["share(1, 7)"], "benchmark", 10.0, 512, reference=True)
        took = time.monotonic() - started
    assert first == [["ok", "2"], ["ok", "4"]]
    assert after == [["ok", expected]]
    assert took < 8  # no finalizer of the earlier job slept in this one


def test_a_child_killed_by_a_signal_without_a_name_is_described(scratch):
    with SandboxWorker(0, scratch) as worker:
        pid = worker.process.pid
        results = worker.run(code_of("realtime_signal_self"), ["double(1)", "double(2)"],
                             "strict", 2.0, 512)
        assert worker.process.pid == pid
    assert results == [["crash", "killed by SIGRTMIN+6"], ["ok", "4"]]


def test_every_wait_status_is_described_without_raising():
    script = ("import json, os, signal, sys; sys.path.insert(0, %r); import sandbox_records as r\n"
              "print(json.dumps([r.describe(None), r.describe(0), r.describe(3 << 8)]"
              " + [r.describe(n) for n in range(1, 65)] + [r.describe(0x7f), r.describe(-1)]))"
              % SANDBOX)
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                          check=True, timeout=60)
    words = json.loads(done.stdout)
    assert words[:3] == ["exited", "exited with status 0", "exited with status 3"]
    by_signal = words[3:67]
    assert by_signal[8] == "killed by SIGKILL" and by_signal[10] == "killed by SIGSEGV"
    assert by_signal[39] == "killed by SIGRTMIN+6"  # 40: no name in Python's enum
    assert all(word.startswith("killed by ") for word in by_signal)
    assert all(isinstance(word, str) and word for word in words[67:])


def test_workers_started_side_by_side_serve_and_close_together(scratch):
    # workers started before any is waited for (wait=False), and ended before any is waited
    # for (close_all): each still greets, serves, and leaves nothing behind
    from sweet_rl.grading.sandbox.client import close_all

    pair = [SandboxWorker(slot, scratch, wait=False) for slot in (0, 1)]
    try:
        assert all(worker.ready().isolation["fork_server"] for worker in pair)
        assert pair[1].run("def f(x):\n    return x + 1\n", ["f(1)"], "strict", 5.0, 256) \
            == [["ok", "2"]]
        scratches = [worker.scratch for worker in pair]
    finally:
        close_all(pair)
    assert worker_processes(scratch) == []
    assert all(worker.process is None for worker in pair)
    assert not any(os.path.exists(path) for path in scratches)
