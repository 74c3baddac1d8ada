"""The miniature recipes' scheduler and settings: at most ``jobs`` stage commands at once, each
with ``threads`` torch threads; a failure in any background step fails the recipe, naming the
step and showing its log; every knob read from its environment variable or its flag, and bad
ones refused before any work."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from sweet_rl.recipes.mini.schedule import Scheduler, StepFailed
from sweet_rl.recipes.mini.settings import (QUICK, BuildSettings, RunSettings,
                                            from_environment)
from tests.conftest import REPO_ROOT

# a stage stand-in: notes when it starts and ends (monotonic clock), sleeping in between
STAGE = ("import os, sys, time; out = sys.argv[1]; open(out, 'w').write(str(time.monotonic()) "
         "+ ' '); time.sleep(0.6); open(out, 'a').write(str(time.monotonic()) + ' ' "
         "+ os.environ['OMP_NUM_THREADS'])")


def _most_at_once(spans):
    return max(sum(1 for s, e, _ in spans if s <= t < e) for t, _, _ in spans)


def _run_stages(tmp_path, capsys, count, jobs, threads=1):
    """``count`` stand-in stages started at once; their (start, end, threads) and the output."""
    marks = tmp_path / "marks"
    marks.mkdir()
    run = Scheduler(jobs, threads, str(tmp_path / "logs"))
    steps = [run.start(f"s{i}", run.python_command, ["-c", STAGE, str(marks / str(i))])
             for i in range(count)]
    run.finish(*steps)
    spans = []
    for i in range(count):
        start, end, used = (marks / str(i)).read_text().split()
        spans.append((float(start), float(end), used))
    return spans, capsys.readouterr().out


def test_at_most_jobs_stages_run_at_once_each_with_its_threads(tmp_path, capsys):
    spans, out = _run_stages(tmp_path, capsys, 6, jobs=2, threads=3)
    assert _most_at_once(spans) == 2  # six stages, two slots: never three, and the slots used
    assert {used for _, _, used in spans} == {"3"}
    for i in range(6):
        assert f"start s{i} (log: {tmp_path}/logs/s{i}.log)" in out
        assert f"done  s{i}" in out


def test_one_job_runs_the_stages_one_after_another(tmp_path, capsys):
    spans, _ = _run_stages(tmp_path, capsys, 2, jobs=1)
    assert _most_at_once(spans) == 1


def test_a_freed_slot_goes_to_the_waiting_request_with_the_smallest_key_then_the_earliest():
    import threading
    import time

    from sweet_rl.recipes.mini.schedule import Slots

    slots, order, lock = Slots(1), [], threading.Lock()
    assert slots.acquire()  # the one slot held while the others line up

    def wait(key, name):
        with slots.held(key):
            with lock:
                order.append(name)

    threads = []
    for key, name in (((2,), "seed2"), ((1, 1), "control seed1"), ((1, 0), "followup seed1"),
                      ((1, 0), "followup seed1, later"), ((), "no priority")):
        threads.append(threading.Thread(target=wait, args=(key, name)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while len(slots.waiting) < len(threads) and time.monotonic() < deadline:
            time.sleep(0.01)  # each request in line before the next arrives
    assert len(slots.waiting) == 5 and not slots.acquire(blocking=False)
    slots.release()
    for thread in threads:
        thread.join(timeout=30)
    assert order == ["no priority", "followup seed1", "followup seed1, later", "control seed1",
                     "seed2"]
    assert slots.acquire(blocking=False) and not slots.acquire(blocking=False)


def test_a_step_s_priority_goes_before_the_one_it_was_started_from(tmp_path):
    from sweet_rl.recipes.mini import schedule

    run, seen = Scheduler(1, 1, str(tmp_path / "logs")), {}

    def inner():
        seen["inner"] = schedule._PRIORITY.key

    def outer():
        seen["outer"] = schedule._PRIORITY.key
        run.finish(run.start("seed1", inner, priority=1), run.start("plain", lambda: None))

    run.finish(run.start("side", outer, priority=0))
    assert seen == {"outer": (0,), "inner": (1, 0)}


def test_a_failed_step_fails_the_recipe_after_the_others_end_and_shows_its_log(tmp_path,
                                                                                capfd):
    run = Scheduler(1, 1, str(tmp_path / "logs"))

    def bad():
        run.say("about to fail")
        run.python_command(["-c", "import sys; sys.exit('the stage broke')"])
        run.say("never reached")

    good = run.start("good", run.python_command, ["-c", "print('fine')"])
    broken = run.start("broken", bad)
    with pytest.raises(StepFailed, match="failed: broken"):
        run.finish(good, broken)
    captured = capfd.readouterr()
    assert "done  good" in captured.out and "done  broken" not in captured.out
    assert "---- broken failed; the end of" in captured.err
    assert "the stage broke" in captured.err and "about to fail" in captured.err
    assert "never reached" not in captured.err
    good_log = (tmp_path / "logs" / "good.log").read_text()
    assert re.fullmatch(r"fine\n\[python -c: \d+\.\d s in a slot\]\n", good_log)
    # the slot of the failed stage was given back: a later stage still runs with one slot
    run.python_command(["-c", "print(7)"])
    assert capfd.readouterr().out == "7\n"


def test_every_command_s_slot_time_goes_into_one_ledger(tmp_path):
    run = Scheduler(2, 1, str(tmp_path / "logs"))
    run.finish(run.start("offline", run.stage, "simulate", "--help"),
               run.start("drills", run.mini, "subset", "--help"),
               run.start("plain", run.python_command, ["-c", "pass"]))
    assert sorted((step, command) for step, command, _ in run.slots.spent) == [
        ("drills", "mini subset"), ("offline", "simulate"), ("plain", "python -c")]
    assert all(seconds > 0 for _, _, seconds in run.slots.spent)
    assert "[simulate: " in (tmp_path / "logs" / "offline.log").read_text()


def test_the_time_ledger_sums_slot_minutes_per_command_most_first():
    from sweet_rl.recipes.mini.schedule import command_name, time_ledger

    assert command_name(["-m", "sweet_rl.cli.main", "sample", "--x"]) == "sample"
    assert command_name(["-m", "sweet_rl.recipes.mini", "warm_start"]) == "mini warm_start"
    assert command_name(["-m", "json.tool"]) == "json.tool"
    assert command_name(["script.py", "1"]) == "script.py"
    spent = [("seed0", "sample", 300.0), ("seed1", "sample", 300.0), ("seed0", "simulate", 120.0),
             ("seed0", "train_dpo", 180.0)]
    text = time_ledger(spent, wall_seconds=600.0, slots=2)
    lines = text.splitlines()
    assert lines[2] == "| sample | 2 | 10.0 | 66.7% |"
    assert lines[3] == "| train_dpo | 1 | 3.0 | 20.0% |"
    assert lines[4] == "| simulate | 1 | 2.0 | 13.3% |"
    assert lines[-1] == ("slot-minutes in commands: 15.0 of 20.0 (2 slots x 10.0 min wall, "
                         "75.0% busy)")


def test_knobs_come_from_the_environment_and_flags_win():
    s = from_environment(RunSettings, ["--num_samples", "4"],
                         {"SEEDS": "0 1", "METHODS": "sweet sweet_sum", "BON_NS": "",
                          "NUM_SAMPLES": "2", "DEVICE": "", "WARM": "", "UNRELATED": "x"})
    assert s.seeds == [0, 1] and s.methods == ["sweet", "sweet_sum"] and s.bon_ns == []
    assert s.num_samples == 4 and s.device == "" and s.warm is None
    assert RunSettings().bon_ns == [1, 2, 4, 8, 16] and RunSettings().critic_lr == 1e-3
    quick = from_environment(RunSettings, [], {"TEST_TASKS": "5"}, QUICK)
    assert quick.families == ["late_fee"] and quick.agent_lr == 3e-5 and quick.test_tasks == 5
    assert quick.bon_critics == [] and quick.out == "outputs/mini_quick"
    build = from_environment(BuildSettings, [], {"MEASURE": "0", "COPY_MIN": "0"})
    assert build.measure is False and build.copy_min == 0


@pytest.mark.parametrize("env,message", [
    ({"JOBS": "0"}, "--jobs (JOBS) must be a positive number, got 0"),
    ({"JOBS": "two"}, "JOBS: --jobs must be an integer, got 'two'"),
    ({"THREADS": "-1"}, "--threads (THREADS) must be a positive number, got -1"),
    ({"METHODS": "sweet swet"}, "unknown method 'swet' in --methods (METHODS)"),
    ({"BON_CRITICS": "regresion"}, "unknown entry 'regresion' in --bon_critics"),
    ({"DEVICE": "gpu"}, "--device (DEVICE) must be cpu or cuda"),
    ({"FIRST_TRY": "4"}, "--first_try (FIRST_TRY) is 4: it must be at least 0 and below "
                         "--tries (TRIES, 4)"),
    ({"FIRST_TRY": "-1"}, "--first_try (FIRST_TRY) is -1"),
])
def test_bad_settings_are_refused(env, message):
    with pytest.raises(ValueError) as err:
        from_environment(RunSettings, [], env)
    assert message in str(err.value)


def test_the_device_sets_the_stages_flag_and_hides_the_gpus_from_the_trainings(tmp_path):
    assert Scheduler(1, 1, str(tmp_path), device="").device_flag == []
    cpu = Scheduler(1, 1, str(tmp_path), device="cpu")
    assert cpu.device_flag == ["--device", "cpu"] and cpu.env["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.parametrize("env,preload", [({"DEVICE": "cuda"}, False), ({}, True),
                                         ({"PRELOAD": "0"}, False)])
def test_a_recipe_s_settings_make_its_scheduler(tmp_path, env, preload):
    from sweet_rl.recipes.mini import forkserver

    settings = from_environment(RunSettings, [], dict(env, JOBS="3", THREADS="2",
                                                      PYTHON="/bin/true"))
    run = Scheduler.for_settings(settings, str(tmp_path / "logs"))
    assert run.python == "/bin/true" and run.env["OMP_NUM_THREADS"] == "2"
    assert run.device_flag == (["--device", "cuda"] if env.get("DEVICE") else [])
    # a cuda stage never forks from the server: it starts from a fresh interpreter
    assert run.preload == (preload and forkserver.supported())
    held = [run.slots.acquire(blocking=False) for _ in range(4)]
    assert held == [True, True, True, False]  # JOBS=3 commands at once
    beside = Scheduler.for_settings(settings, str(tmp_path / "other"), run.slots)
    assert beside.slots is run.slots  # two recipes side by side share one pool


@pytest.mark.parametrize("script,env", [
    ("run_mini_quick.sh", {"DEVICE": "gpu"}),
    ("run_mini_reproduction.sh", {"METHODS": "sweet swet"}),
    ("build_mini_agent.sh", {"JOBS": "0"}),
])
def test_the_recipes_refuse_bad_knobs_before_any_work(tmp_path, script, env):
    out = tmp_path / "mini"
    refused = subprocess.run(["bash", f"scripts/{script}"], capture_output=True, text=True,
                             timeout=60, cwd=REPO_ROOT,
                             env=dict(os.environ, OUT=str(out), PYTHON=sys.executable, **env))
    assert refused.returncode == 2 and refused.stderr.startswith("error: "), refused.stderr
    assert not out.exists() and not (tmp_path / "warm").exists()
