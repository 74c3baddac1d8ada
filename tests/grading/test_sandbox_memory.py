"""The children's memory cgroup: finding the process's memory cgroup, and the real bound."""

import os

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
