"""The worker's children across jobs: each answer's child is forked ahead of its job (while
the grader works on the previous reply), yet it is confined like any other and finds nothing
of the answer before it; an answer's child is stopped as soon as its last record is in."""

import os
import time

from sweet_rl.grading.decode import decode
from sweet_rl.grading.sandbox.client import SandboxWorker
from tests.grading.hostile_helpers import PROBE

LEAVE_FILES = ("def leave(n):\n    for i in range(n):\n"
               "        open('left%d.txt' % i, 'w').close()\n    return n\n")
SLOW = "def slow():\n    while True:\n        pass\n"


def test_a_child_forked_ahead_of_its_job_is_confined_and_starts_clean(tmp_path):
    outside = str(tmp_path / "outside.txt")
    expected = ("EPERM", "EPERM", "EACCES", "ok", ["inside.txt"])
    with SandboxWorker(0, str(tmp_path)) as worker:
        assert worker.isolation["landlock_abi"] > 0 and worker.isolation["seccomp"]
        seen = [worker.run(PROBE, [f"probe({outside!r})"], "strict", 2.0, 512)]
        # files an answer leaves, then a child that was forked before this job's reply
        assert worker.run(LEAVE_FILES, ["leave(3)"], "strict", 2.0, 512) == [["ok", "3"]]
        seen.append(worker.run(PROBE, [f"probe({outside!r})"], "strict", 2.0, 512))
        # a test that times out: the next test of the same job gets a fresh child at once
        mixed = worker.run(PROBE + SLOW, ["slow()", f"probe({outside!r})"], "strict", 0.3, 512)
        assert mixed[0][0] == "timeout"
        seen.append(mixed[1:])
        seen.append(worker.run(PROBE, [f"probe({outside!r})"], "strict", 2.0, 512))
    assert [[(status, decode(value)) for status, value in results] for results in seen] == \
        [[("ok", expected)]] * 4
    assert not os.path.exists(outside)


# The answer finds its job's nonce in the harness's frame, sends its only record itself and
# keeps running. It gains a record with a value it could have returned; it must not keep
# running beside the grader's next job.
FORGER = """
import os, sys

def forge():
    frame = sys._getframe()
    while "nonce" not in frame.f_locals:
        frame = frame.f_back
    nonce = frame.f_locals["nonce"]
    # its pid as the test sees it: the child runs in a pid namespace of its own, and
    # /proc/self names it as the /proc the test reads does
    pid = int(os.readlink("/proc/self"))
    os.write(3, nonce + b" " + ('[0, "ok", "%d"]\\n' % pid).encode())
    while True:
        pass
"""


def _running(pid):
    """True while ``pid`` is a live (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_a_child_that_keeps_running_after_its_last_record_is_stopped(tmp_path):
    with SandboxWorker(0, str(tmp_path)) as worker:
        [(status, pid)] = worker.run(FORGER, ["forge()"], "strict", 30.0, 512)
        assert status == "ok"
        # SIGKILL was sent before the reply; the kernel may need a moment to carry it out
        deadline = time.monotonic() + 5
        while _running(int(pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _running(int(pid))
        assert worker.run(LEAVE_FILES, ["leave(2)"], "strict", 2.0, 512) == [["ok", "2"]]
