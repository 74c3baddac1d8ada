"""Hostile answers, each with a known expected score, graded together in one batch.

``tests/fixtures/adversarial_answers.jsonl`` holds one attack per line (fork bomb, memory
bomb, endless loop, ``input()``, print flood, file writes and deletes, a socket, environment
snooping, killing the parent, ``sys.exit``, a ctypes segfault, monkeypatched builtins, the
``__eq__`` spoof, a forged result line, outputs that would stall the comparison …) with the
score it must get under each rule set. Placeholders in the
answers are filled here: a canary file that must survive, a path outside the sandbox that must
stay unwritten, the task file itself (which must not be readable), and the port of a
listening socket that must receive no connection.
"""

import json
import os
import socket

import pytest

from sweet_rl.evaluation.code_grader import Grader
from sweet_rl.evaluation.sandbox import SandboxWorker

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "adversarial_answers.jsonl")
SECRET = "s3cret-value"


def worker_processes(scratch_root):
    """PIDs of sandbox workers or their children started under ``scratch_root``, still alive
    (children are forks of their worker, so they share its command line)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read()
            except OSError:
                continue
            if b"sandbox_worker.py" in command and str(scratch_root).encode() in command:
                found.append(int(entry))
    return found


def test_this_machine_has_the_isolation_the_attacks_assume(tmp_path):
    # the attacks below signal every process they can: without seccomp they would take
    # the test run down with them, so check first
    with SandboxWorker(0, str(tmp_path)) as worker:
        assert worker.isolation["seccomp"] is True
        assert worker.isolation["private_network"] or worker.isolation["landlock_abi"] >= 4


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def load_attacks(tmp_path, port):
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    outside = tmp_path / "escaped.txt"
    fills = {"__CANARY__": str(canary), "__OUTSIDE__": str(outside),
             "__TASK_FILE__": os.path.abspath(FIXTURE), "__PORT__": str(port)}
    attacks = []
    with open(FIXTURE) as handle:
        for line in handle:
            text = line
            for key, value in fills.items():
                text = text.replace(key, value)
            attacks.append(json.loads(text))
    return attacks, canary, outside


@pytest.mark.parametrize("rules", ["benchmark", "strict"])
def test_every_attack_gets_its_expected_score(rules, tmp_path, listener, monkeypatch, capfd):
    monkeypatch.setenv("SWEET_RL_ADVERSARIAL_SECRET", SECRET)
    attacks, canary, outside = load_attacks(tmp_path, listener.getsockname()[1])
    names = [a["name"] for a in attacks]
    for required in ("fork_bomb", "memory_bomb", "infinite_loop", "reads_input", "print_flood",
                     "files", "socket", "environment", "kill_parent", "sys_exit", "segfault",
                     "monkeypatch_builtins", "eq_spoof", "alarm_disabled", "swallows_timeout",
                     "exit_on_second_test", "forged_hash_flood", "nested_counters",
                     "eq_spoof_comparing_test"):
        assert required in names

    with SandboxWorker(0, str(tmp_path)) as worker:
        if not worker.isolation["seccomp"]:
            pytest.fail("no seccomp here: refusing to run attacks that signal every process")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    grader = Grader(rules, timeout=1.0, memory_mb=512, workers=2, scratch_root=str(scratch))
    results = grader.grade([(a["answer"], a["ground_truth"], a["test_cases"]) for a in attacks])

    got = {a["name"]: r.reward for a, r in zip(attacks, results)}
    expected = {a["name"]: a["expected"][rules] for a in attacks}
    assert got == expected, {n: (got[n], expected[n]) for n in names if got[n] != expected[n]}
    # answers that defeat the child's own timer are still cut per test by the worker's clock,
    # and results delivered before a crash are kept
    by_name = {a["name"]: r for a, r in zip(attacks, results)}
    assert by_name["alarm_disabled"].tests == ["timeout", "timeout"]
    assert by_name["swallows_timeout"].tests == ["timeout", "timeout"]
    assert by_name["exit_on_second_test"].tests[0] == "pass"
    assert by_name["exit_on_second_test"].tests[1].startswith("crash")

    # nothing escaped: files, network, processes, output
    assert canary.read_text() == "still here"
    assert not outside.exists()
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert worker_processes(scratch) == []
    assert list(scratch.iterdir()) == []  # every scratch folder removed
    out, err = capfd.readouterr()
    assert "flood" not in out and "flood" not in err
    assert grader.isolation["seccomp"] is True

    by_name = dict(zip(names, results))
    assert by_name["infinite_loop"].tests == ["timeout", "timeout"]
    assert by_name["segfault"].tests == ["crash", "crash"]
    assert by_name["eq_spoof"].tests == ["fail", "fail"]
    assert by_name["memory_bomb"].tests == ["error:MemoryError"] * 2
    # forged or costly outputs are refused by the decoder instead of stalling the grader
    assert by_name["forged_hash_flood"].tests == ["crash", "pass"]
    assert by_name["nested_counters"].tests == ["reference:crash"] * 2
    if rules == "benchmark":
        assert by_name["sys_exit"].blocked_word == "exit("
    else:
        assert by_name["sys_exit"].tests == ["error:SystemExit"] * 2


def test_files_an_answer_writes_in_its_scratch_folder_are_removed(tmp_path):
    grader = Grader("strict", timeout=1.0, memory_mb=512, workers=1, scratch_root=str(tmp_path))
    answer = "def make(x):\n    open('left.txt', 'w').write('x' * x)\n    return open('left.txt').read()\n"
    [result] = grader.grade([(answer, answer, {"t": "make(3)"})])
    assert result.reward == 1.0
    assert list(tmp_path.iterdir()) == []
