"""The children's memory cgroup: finding the process's memory cgroup, the real bound, and
what a restarted worker gets (a cgroup of its own; a bound it could not get is reported)."""

import json
import os
import signal
import subprocess

import pytest

from sweet_rl.grading.sandbox import sandbox_memory
from sweet_rl.grading.grader import Grader
from sweet_rl.grading.sandbox.client import SandboxWorker
from sweet_rl.grading.sandbox.sandbox_memory import memory_cgroup_folder

V1_CGROUP = "9:name=systemd:/\n4:memory:/jobs/abc\n3:cpuset:/\n0::/\n"
V1_MOUNTS = (
    "30 25 0:26 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 25 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
V2_CGROUP = "0::/user.slice/grader.scope\n"
V2_MOUNTS = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def test_the_v1_memory_hierarchy_wins_when_it_holds_the_controller():
    seen = []
    found = memory_cgroup_folder(V1_CGROUP, V1_MOUNTS, exists=lambda p: seen.append(p) or True)
    assert found == (1, "/sys/fs/cgroup/memory/jobs/abc")
    assert seen == ["/sys/fs/cgroup/memory/jobs/abc"]  # never the controller-less cgroup2 mount


def test_a_pure_v2_machine_uses_the_unified_hierarchy():
    assert memory_cgroup_folder(V2_CGROUP, V2_MOUNTS, exists=lambda p: True) == (
        2, "/sys/fs/cgroup/user.slice/grader.scope")


def test_inside_a_cgroup_namespace_paths_are_relative_to_the_mount_root():
    mounts = "31 25 0:27 /jobs /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    assert memory_cgroup_folder(V1_CGROUP, mounts, exists=lambda p: True) == (
        1, "/sys/fs/cgroup/memory/abc")


def test_no_mounted_memory_cgroup_says_so():
    version, why = memory_cgroup_folder(V1_CGROUP, V1_MOUNTS.splitlines()[0], exists=lambda p: True)
    assert version is None and "no memory cgroup" in why
    assert memory_cgroup_folder(V1_CGROUP, V1_MOUNTS, exists=lambda p: False)[0] is None


# 40 files of 8 MiB each, 320 MiB in all, each file under the file size limit and all of them
# in the job folder's tmpfs (512 MiB): without a cgroup they outlive the 128 MiB bound
HOARD = ("def f(n):\n    kept = 0\n    for i in range(n):\n"
         "        with open('hoard%d' % i, 'wb') as handle:\n"
         "            for _ in range(8):\n                handle.write(b'y' * (1 << 20))\n"
         "                kept += 1\n    return kept\n")
HONEST = "def f(n):\n    return 8 * n\n"


def _cgroup_or_skip(worker):
    if not worker.isolation.get("memory_cgroup"):
        pytest.skip("no memory cgroup can be made here (an unprivileged grader, or no memory "
                    "controller to delegate): answers are bounded by their address space only")


def test_files_an_answer_keeps_count_against_its_memory_bound(tmp_path):
    with SandboxWorker(1, str(tmp_path), memory_mb=128) as worker:
        _cgroup_or_skip(worker)
        folder = worker.cgroup
        assert os.path.isdir(folder)
        results = worker.run(HOARD, ["f(2)", "f(40)", "f(3)"], "benchmark", 3.0, 128)
    assert results == [["ok", "16"], ["crash", "killed by SIGKILL"], ["ok", "24"]]
    assert not os.path.exists(folder)  # removed with its worker


def test_a_hoarding_answer_fails_alone_in_a_batch(tmp_path):
    grader = Grader("benchmark", timeout=3.0, memory_mb=128, workers=1, scratch_root=str(tmp_path))
    tests = {"a": "f(2)", "b": "f(40)", "c": "f(3)"}
    results = grader.grade(
        [(HONEST, HONEST, tests), (HOARD, HONEST, tests), (HONEST, HONEST, tests)]
    )
    if not grader.isolation.get("memory_cgroup"):
        pytest.skip("no memory cgroup can be made here")
    assert [r.tests for r in results] == [["pass"] * 3, ["pass", "crash", "pass"], ["pass"] * 3]


def test_left_over_cgroups_of_dead_graders_are_removed(tmp_path):
    folder, why = sandbox_memory.create("probe", 64)
    if folder is None:
        pytest.skip(f"no memory cgroup can be made here: {why}")
    parent = os.path.dirname(folder)
    stale = os.path.join(parent, f"{sandbox_memory.NAME_PREFIX}999999999_old")  # no such pid
    os.mkdir(stale)
    try:
        again, _ = sandbox_memory.create("probe2", 64)
        assert not os.path.exists(stale)
        assert os.path.isdir(folder)  # ours (a live pid) is left alone
        assert sandbox_memory.remove(again)
    finally:
        sandbox_memory.remove(folder)
        if os.path.exists(stale):
            os.rmdir(stale)
    assert not os.path.exists(folder)


def test_a_restarted_worker_gets_a_cgroup_of_its_own_and_its_bound_holds(tmp_path):
    with SandboxWorker(1, str(tmp_path), memory_mb=128) as worker:
        _cgroup_or_skip(worker)
        first = worker.cgroup
        # a process left in the first worker's cgroup, as a child that outlived its worker
        # would be: it holds the cgroup, so a restart that reused the name would find no
        # cgroup to make and run without a bound
        holder = subprocess.Popen(["sleep", "600"])
        with open(os.path.join(first, "cgroup.procs"), "w") as handle:
            handle.write(str(holder.pid))
        os.kill(worker.process.pid, signal.SIGKILL)  # the worker dies; the next job restarts it
        results = worker.run(HOARD, ["f(2)", "f(40)"], "benchmark", 3.0, 128)
        assert worker.cgroup != first and os.path.isdir(worker.cgroup)
        assert worker.isolation["memory_cgroup"] and worker.lost == []
        assert worker.weakest["memory_cgroup"] == worker.isolation["memory_cgroup"]
    assert results == [["ok", "16"], ["crash", "killed by SIGKILL"]]
    assert holder.wait(timeout=10) == -signal.SIGKILL  # killed with the cgroup it held
    assert not os.path.exists(first)


def _restart_without_a_cgroup(monkeypatch):
    """Let the first worker start make its cgroup and every later start fail to, and make the
    worker die once, after its task's reference ran and before the answer's job is written:
    it is restarted, without a cgroup."""
    from sweet_rl.grading.sandbox import client

    real_create, made = sandbox_memory.create, []

    def create(tag, memory_mb):
        made.append(tag)
        return real_create(tag, memory_mb) if len(made) <= 1 else (None, "refused here")

    real_submit, killed, submitted = client.SandboxWorker.submit, [], []

    def submit(self, *args, **kwargs):
        # the worker dies before the answer's job is written (killed after the write, a fast
        # worker could have replied already, and nothing would restart it); the first job is
        # the reference's
        submitted.append(self.slot)
        if len(submitted) == 2 and not killed:
            killed.append(self.process.pid)
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        real_submit(self, *args, **kwargs)

    monkeypatch.setattr(sandbox_memory, "create", create)
    monkeypatch.setattr(client.SandboxWorker, "submit", submit)
    return killed


def test_a_layer_a_restarted_worker_lost_is_in_the_sidecar_and_the_metrics_line(
        tmp_path, monkeypatch, capsys):
    from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code

    with SandboxWorker(1, str(tmp_path), memory_mb=128) as probe:
        _cgroup_or_skip(probe)
    killed = _restart_without_a_cgroup(monkeypatch)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    rows = tmp_path / "rows.jsonl"
    row = {"task": {"problem_description": "double a number", "ground_truth": HONEST,
                    "test_cases": {"a": "f(1)", "b": "f(2)"}},
           "dialogue_history": [{"role": "user", "content": "double a number"},
                                {"role": "assistant", "content": "I WANT TO ANSWER: " + HONEST}],
           "answer": HONEST}
    rows.write_text(json.dumps(row) + "\n")
    evaluate_code(EvaluateCodeOptions(saved_path=str(rows), memory_mb=128, workers=1))
    assert len(killed) == 1
    metrics = capsys.readouterr().out
    assert "sandbox layers lost on a restart: memory_cgroup" in metrics
    with open(str(rows) + ".config.json") as handle:
        isolation = json.load(handle)["stages"]["evaluate_code"]["sandbox_isolation"]
    assert isolation["memory_cgroup"] is False
    assert isolation["lost_on_restart"] == ["memory_cgroup"]
    graded = json.loads(rows.read_text())
    assert graded["reward"] == 1.0  # the job was sent again to the restarted worker
