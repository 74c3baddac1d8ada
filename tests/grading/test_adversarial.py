"""Hostile answers, each with a known expected score, graded together in one batch.

``tests/fixtures/adversarial_answers.jsonl`` holds one attack per line (fork bomb, memory
bomb, endless loop, ``input()``, print flood, file writes and deletes, sockets, environment
snooping, signals to the worker, reaching into it, forged results, time limit dodges, state
and memory left for later answers …) with the score it must get under each rule set, and
honest answers between the groups, whose scores the attacks must not move. The placeholders
in the answers are filled by :class:`~tests.grading.hostile_helpers.HostileWorld` (a
canary file, a path outside, the task file, listening sockets, a bystander process, IPC
keys), which then says what the attacks changed outside the sandbox: nothing, or the test
fails. Rows marked ``known_break`` are left out until they are fixed.

The batch runs as the test's user (root here, so the sandbox's own uid or root without
capabilities) and, where this machine allows it, as an unprivileged uid in a subprocess.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from sweet_rl.grading.sandbox import sandbox_confine as confine
from sweet_rl.grading.grader import RULES, Grader
from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.grading.sandbox.client import SandboxError, SandboxWorker
from sweet_rl.grading.sandbox.sandbox_cleanup import scratch_reachable
from tests.grading.hostile_helpers import (FIXTURE, PROJECT, SECRET, grade_batch, load_rows,
                                              make_scratch_root, worker_processes)

pytestmark = pytest.mark.slow  # batches of hostile answers through the sandbox

HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_helpers.py")
NOBODY = 65534  # the unprivileged uid (and gid) the second half runs as
REQUIRED = ("fork_bomb", "memory_bomb", "infinite_loop", "reads_input", "print_flood", "files",
            "socket", "environment", "kill_parent", "sys_exit", "segfault",
            "monkeypatch_builtins", "eq_spoof", "alarm_disabled", "swallows_timeout",
            "exit_on_second_test", "forged_hash_flood", "nested_counters",
            "eq_spoof_comparing_test", "sigmask_blocks_alarm", "bare_except_slow_loop",
            "handler_returns_and_timer_cleared", "rewinds_the_childs_clock",
            "forge_guessed_nonces", "packet_drip", "signal_syscalls", "pidfd_getfd_worker",
            "unix_datagrams", "unencodable_names", "large_reply", "fake_end_of_stream",
            "reopen_job_channel", "orphan_maker", "keepalive_and_padding",
            "reference_changes_its_process", "watches_files_outside", "realtime_signal_self",
            "numpy_float32_against_python_floats")

# Per-test verdicts of newer rows, where the words follow from the attack alone:
TIME_LIMIT_DODGES = {
    # class 5: on its first test each answer defeats the child's timer (SIGALRM blocked, a
    # bare except around the loop, a handler that returns and clears the timer, a rewritten
    # start time) and works 1.3-2.5 s, over the 1 s limit: that test is a timeout whatever
    # the answer did with the timer; the second test returns at once and passes
    "sigmask_blocks_alarm": ["timeout", "pass"],
    "bare_except_slow_loop": ["timeout", "pass"],
    "handler_returns_and_timer_cleared": ["timeout", "pass"],
    "rewinds_the_childs_clock": ["timeout", "pass"],
}
ATTACKS_THAT_THEN_ANSWER_RIGHT = {
    # classes 3, 4 and 9: the signal, pidfd and AF_UNIX calls are refused and each answer then
    # returns the right value, "right" only when every attempt failed: both tests pass
    "signal_syscalls": ["pass", "pass"],
    "pidfd_getfd_worker": ["pass", "pass"],
    "unix_datagrams": ["pass", "pass"],
}
FORGED = {
    # class 2: records written under guessed nonces are refused and the answer's own values
    # are wrong; one-byte packets without end keep the worker reading, and the per-test
    # deadline still cuts both tests
    "forge_guessed_nonces": ["fail", "fail"],
    "packet_drip": ["timeout", "timeout"],
}


@pytest.fixture
def scratch():
    path = make_scratch_root()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_this_machine_has_the_isolation_the_attacks_assume(scratch):
    # the attacks below signal every process they can: without seccomp they would take
    # the test run down with them, so check first
    with SandboxWorker(0, scratch) as worker:
        assert worker.isolation["seccomp"] is True
        assert worker.isolation["private_network"] or worker.isolation["landlock_abi"] >= 4


def require_seccomp(scratch):
    with SandboxWorker(0, scratch) as worker:
        if not worker.isolation["seccomp"]:
            pytest.fail("no seccomp here: refusing to run attacks that signal every process")


def check_batch(summary, rules, tmp_path):
    """Every assertion on one graded batch (the same for every uid it ran as)."""
    results = summary["results"]
    for required in REQUIRED:
        assert required in results
    got = {name: row["reward"] for name, row in results.items()}
    expected = summary["expected"]
    assert got == expected, {n: (got[n], expected[n]) for n in got if got[n] != expected[n]}
    tests = {name: row["tests"] for name, row in results.items()}
    # the verdict words and refused packets a row states, where it states them
    wrong = {name: (tests[name], words) for name, words in summary["verdicts"].items()
             if tests[name] != words}
    assert wrong == {}
    for name, refused in summary["refused"].items():
        assert (results[name]["refused"] > 0 if refused == "some"
                else results[name]["refused"] == refused), (name, results[name]["refused"])

    # nothing escaped: files, metadata, network, signals, IPC, keyring; no process left,
    # every scratch folder removed; no worker came back from a restart with a layer less
    assert summary["problems"] == []
    assert summary["workers_left"] == []
    assert summary["scratch_left"] == []
    assert summary["isolation"]["seccomp"] is True
    assert summary["isolation"]["pid_namespace"] is True
    assert "lost_on_restart" not in summary["isolation"]

    # the row writer takes every text an answer put into a row (lone surrogates included)
    # and reads it back the same
    rows = [{"name": name, "grader_tests": row["tests"], "test_results": row["test_results"]}
            for name, row in results.items()]
    written = tmp_path / "graded_rows.jsonl"
    write_jsonl(str(written), rows)
    assert read_jsonl(str(written)) == rows
    assert "\\ud800" in written.read_text(encoding="utf-8")

    # answers that defeat the child's own timer are still cut per test by the worker's clock,
    # and results delivered before a crash are kept
    assert tests["alarm_disabled"] == ["timeout", "timeout"]
    assert tests["swallows_timeout"] == ["timeout", "timeout"]
    assert tests["exit_on_second_test"][0] == "pass"
    assert tests["exit_on_second_test"][1].startswith("crash")
    assert tests["infinite_loop"] == ["timeout", "timeout"]
    assert tests["segfault"] == ["crash", "crash"]
    assert tests["eq_spoof"] == ["fail", "fail"]
    assert tests["memory_bomb"] == ["error:MemoryError"] * 2
    # a packet the answer writes itself lacks the job's nonce: refused, never a result
    assert tests["forged_hash_flood"] == ["pass", "pass"]
    assert results["forged_hash_flood"]["refused"] == 2
    assert tests["nested_counters"] == ["reference:crash"] * 2
    if rules == "benchmark":
        assert results["sys_exit"]["blocked_word"] == "exit("
    else:
        assert tests["sys_exit"] == ["error:SystemExit"] * 2

    for name, words in {**TIME_LIMIT_DODGES, **ATTACKS_THAT_THEN_ANSWER_RIGHT, **FORGED}.items():
        assert tests[name] == words, name
    for name in FORGED:
        assert results[name]["refused"] > 0, name  # what it forged was counted, not taken
    # a "look" row's reference says "found": it scores 1 only if an earlier "plant" row left
    # something behind (files, keys, memory, limits, IPC objects, metadata); every one that
    # is not a known break must find nothing and fail its one test
    looks = [name for name in results if name.startswith("look_")]
    assert len(looks) >= 4
    for name in looks:
        assert (got[name], tests[name]) == (0.0, ["fail"]), name
    # the honest answers between groups of attacks: every test passes
    honest = [name for name in results if name.startswith("honest_after")]
    assert len(honest) >= 5
    for name in honest:
        assert set(tests[name]) == {"pass"}, name


@pytest.mark.parametrize("rules", RULES)
def test_every_attack_gets_its_expected_score(rules, tmp_path, scratch, monkeypatch, capfd):
    monkeypatch.setenv("SWEET_RL_ADVERSARIAL_SECRET", SECRET)
    names = [row["name"] for row in load_rows()]
    for required in REQUIRED:
        assert required in names
    require_seccomp(scratch)
    summary = grade_batch(rules, str(tmp_path), scratch)
    check_batch(summary, rules, tmp_path)
    assert sorted(summary["results"]) == sorted(names)
    out, err = capfd.readouterr()
    assert "flood" not in out and "flood" not in err


# -- the batch as another uid ---------------------------------------------------------------
def closed_folder(path, uid, gid):
    """The first folder on the way to ``path`` (links resolved) that a process of ``uid``/
    ``gid`` without capabilities may not search, or None (plain mode bits, as the kernel)."""
    folders = [os.path.dirname(os.path.realpath(path))]
    while os.path.dirname(folders[-1]) != folders[-1]:
        folders.append(os.path.dirname(folders[-1]))
    for folder in reversed(folders):
        info = os.stat(folder)
        bits = (info.st_mode >> 6 if info.st_uid == uid else
                info.st_mode >> 3 if info.st_gid == gid else info.st_mode)
        if not bits & 0o1:
            return folder
    return None


def as_user_env(folder):
    """The environment of a batch run as another uid: the project importable, home in
    ``folder``, the secret the ``environment`` answer looks for."""
    path = os.pathsep.join(
        [PROJECT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": folder, "TMPDIR": folder,
            "PYTHONPATH": path, "SWEET_RL_ADVERSARIAL_SECRET": SECRET}


def as_user_obstacle(uid, gid, folder):
    """Why a process of ``uid`` cannot run the batch here (None: it can). Tried for real: it
    must execute this interpreter, import the grader and tqdm from the project and read the
    helpers and the fixture, with ``folder`` (its world and scratch) reachable and writable."""
    reachable, blocker = scratch_reachable(folder, uid, gid)
    if not reachable:
        return f"uid {uid} cannot write in {folder}: {blocker} is closed to it"
    probe = (f"import sweet_rl.grading.grader, tqdm; open({FIXTURE!r}).close(); "
             f"open({HELPERS!r}).close()")
    try:
        done = subprocess.run([sys.executable, "-c", probe], user=uid, group=gid, extra_groups=[],
                              env=as_user_env(folder), cwd=folder, capture_output=True, text=True,
                              timeout=120)
    except OSError as error:
        closed = closed_folder(sys.executable, uid, gid)
        where = f" ({closed} is not searchable by it)" if closed else ""
        return f"uid {uid} cannot execute {sys.executable}{where}: {error}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"uid {uid} cannot import sweet_rl from {PROJECT} with {sys.executable}: {last}"
    return None


@pytest.mark.parametrize("rules", RULES)
def test_every_attack_gets_its_expected_score_as_an_unprivileged_user(rules, tmp_path):
    if os.geteuid() != 0:
        pytest.skip(f"this run is already unprivileged (uid {os.geteuid()}): "
                    "test_every_attack_gets_its_expected_score is that half")
    folder = tempfile.mkdtemp(prefix="sweet_rl_unprivileged_")
    try:
        os.chown(folder, NOBODY, NOBODY)
        obstacle = as_user_obstacle(NOBODY, NOBODY, folder)
        if obstacle:
            pytest.skip(f"cannot run the batch as an unprivileged user here: {obstacle}")
        out = os.path.join(folder, "summary.json")
        done = subprocess.run([sys.executable, HELPERS, rules, folder, out], user=NOBODY,
                              group=NOBODY, extra_groups=[], env=as_user_env(folder), cwd=folder,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        assert "flood" not in done.stdout and "flood" not in done.stderr
        with open(out) as handle:
            summary = json.load(handle)
        # a worker started by a normal user runs as that user (in its own namespaces)
        assert summary["isolation"]["user"] == "the calling user"
        check_batch(summary, rules, tmp_path)
        assert worker_processes(folder) == []
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_scratch_root_the_sandbox_user_cannot_enter_is_refused_naming_the_folder(scratch):
    # attack class 11 of docs/safety.md: a scratch root under a 0700 folder of another uid
    # would make every reference "reference:crash" and every answer score 0, silently
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can put the scratch root in a folder of another uid")
    # the uid the worker runs its children on (sandbox_worker.Worker): as root, a uid of its
    # own (SANDBOX_UID_BASE + slot) where that uid can read the Python installation, else
    # root itself without capabilities, which plain mode bits stop just as well
    sandbox_uid = confine.SANDBOX_UID_BASE if confine.installation_readable_by_others() else 0
    owner = NOBODY if sandbox_uid != NOBODY else NOBODY - 1
    locked = os.path.join(scratch, "locked")
    os.mkdir(locked, 0o700)
    os.chown(locked, owner, owner)
    root = os.path.join(locked, "scratch")
    os.mkdir(root)
    named = re.compile(re.escape(os.path.realpath(locked)) + r"(?![\w/.-])")  # itself, not a prefix
    with pytest.raises(SandboxError) as caught:
        SandboxWorker(0, root)
    assert named.search(str(caught.value)), str(caught.value)
    # the grader refuses before grading anything, with the same message
    grader = Grader("benchmark", timeout=1.0, memory_mb=256, workers=1, scratch_root=root)
    with pytest.raises(SandboxError) as caught:
        grader.grade([("def one():\n    return 1\n", "def one():\n    return 1\n", {"t": "one()"})])
    assert named.search(str(caught.value)), str(caught.value)
    assert os.listdir(root) == []  # the refused workers' scratch folders are removed
    assert worker_processes(root) == []


def test_files_an_answer_writes_in_its_scratch_folder_are_removed(scratch):
    grader = Grader("strict", timeout=1.0, memory_mb=512, workers=1, scratch_root=scratch)
    answer = ("def make(x):\n    open('left.txt', 'w').write('x' * x)\n"
              "    return open('left.txt').read()\n")
    [result] = grader.grade([(answer, answer, {"t": "make(3)"})])
    assert result.reward == 1.0
    assert os.listdir(scratch) == []
