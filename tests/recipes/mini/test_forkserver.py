"""Stage commands forked from a preloaded server (sweet_rl/recipes/mini/forkserver.py) behave
as fresh interpreters do: output in the step's log, exit statuses, exceptions and signals,
exit handlers, the environment and working directory, stages side by side, and byte-identical
results of a real training."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import textwrap

import pytest

from sweet_rl.recipes.mini import forkserver
from sweet_rl.recipes.mini.schedule import Scheduler, StepFailed
from tests.training.helpers import trajectories

pytestmark = pytest.mark.skipif(not forkserver.supported(), reason="fork servers are Linux's")

# the line a step's log ends with once its command is done
TIME_LINE = r"\[fs_stage: \d+\.\d s in a slot\]"
# a stage stand-in, run as ``python -m fs_stage MODE ARGS``
STAGE = textwrap.dedent("""\
    import atexit, os, sys, threading, time
    mode, rest = sys.argv[1], sys.argv[2:]
    print("preloaded" if "transformers" in sys.modules else "fresh", flush=True)
    if mode == "echo":
        import torch
        print("to stdout")
        print("to stderr", file=sys.stderr)
        print("cwd", os.getcwd(), "threads", os.environ["OMP_NUM_THREADS"],
              torch.get_num_threads(), "args", rest)
    elif mode == "exit":
        sys.exit(int(rest[0]))
    elif mode == "message":
        sys.exit("the stage gave up")
    elif mode == "raise":
        raise RuntimeError("the stage broke")
    elif mode == "kill":
        os.kill(os.getpid(), 9)
    elif mode == "interrupt":
        raise KeyboardInterrupt
    elif mode == "meet":  # proves two stages run at once: each waits for the other's mark
        open(rest[0], "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(rest[1]):
            if time.monotonic() > deadline:
                sys.exit(5)
            time.sleep(0.05)
    elif mode == "finish":
        atexit.register(lambda: open(rest[0], "w").write("exit handler ran"))
        def late():
            time.sleep(0.5)
            open(rest[1], "w").write("thread finished")
        threading.Thread(target=late).start()
    """)


@pytest.fixture(scope="module")
def stage_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stage_module")
    (folder / "fs_stage.py").write_text(STAGE)
    return str(folder)


@pytest.fixture()
def scheduler(stage_path, tmp_path, monkeypatch):
    """A scheduler whose stages can import fs_stage; one server for every test here (the same
    interpreter and environment)."""
    monkeypatch.setenv("PYTHONPATH", stage_path)

    def make(preload=True, jobs=1):
        run = Scheduler(jobs, 1, str(tmp_path / "logs"), preload=preload)
        # pytest names the running test in the environment; a server serves one environment,
        # so without this every test would start (and pay for) a server of its own
        run.env.pop("PYTEST_CURRENT_TEST", None)
        return run
    return make


def _in_step(run, name, *args):
    """``python -m fs_stage ARGS`` as background step ``name``: its log's text, or the error."""
    step = run.start(name, run.python_command, ["-m", "fs_stage", *args])
    step.thread.join()
    with open(step.log) as handle:
        return handle.read(), step.error


def test_a_forked_stage_writes_to_its_log_in_order_with_the_recipe(scheduler, tmp_path,
                                                                   monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    run = scheduler()

    def step():
        run.say("before")
        run.python_command(["-m", "fs_stage", "echo", "a b", "--flag"])
        run.say("after")

    started = run.start("echo", step)
    run.finish(started)
    lines = (tmp_path / "logs" / "echo.log").read_text().splitlines()
    assert lines[0] == "before" and lines[1] == "preloaded" and lines[-1] == "after"
    assert re.fullmatch(TIME_LINE, lines[-2])  # its time, once done
    assert sorted(lines[2:-2]) == sorted(
        ["to stdout", "to stderr", f"cwd {work} threads 1 1 args ['a b', '--flag']"])


def test_without_preload_each_stage_is_a_fresh_interpreter(scheduler):
    text, error = _in_step(scheduler(preload=False), "fresh", "exit", "0")
    assert error is None and re.fullmatch(rf"fresh\n{TIME_LINE}\n", text)


@pytest.mark.parametrize("args,status,shown", [
    (["exit", "3"], 3, ""),
    (["message"], 1, "the stage gave up"),
    (["raise"], 1, "RuntimeError: the stage broke"),
    (["kill"], -9, ""),
    (["interrupt"], -2, "KeyboardInterrupt"),
])
def test_exit_statuses_exceptions_and_signals_reach_the_recipe(scheduler, args, status, shown):
    text, error = _in_step(scheduler(), "failing", *args)
    assert isinstance(error, StepFailed) and str(error).endswith(f"exited with {status}")
    assert text.startswith("preloaded\n") and shown in text


def test_exit_handlers_run_and_threads_are_joined(scheduler, tmp_path):
    handler, thread = tmp_path / "handler", tmp_path / "thread"
    text, error = _in_step(scheduler(), "finish", "finish", str(handler), str(thread))
    assert error is None
    assert handler.read_text() == "exit handler ran"
    assert thread.read_text() == "thread finished"


def test_stages_run_side_by_side(scheduler, tmp_path):
    run = scheduler(jobs=2)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    steps = [run.start("one", run.python_command, ["-m", "fs_stage", "meet", a, b]),
             run.start("two", run.python_command, ["-m", "fs_stage", "meet", b, a])]
    run.finish(*steps)  # each would exit 5 after 60 s without the other


def test_the_server_ends_when_its_recipe_closes_it(stage_path, tmp_path):
    env = dict(os.environ, PYTHONPATH=stage_path, OMP_NUM_THREADS="1")
    # what was imported beforehand plays no part in closing: a server without the preload
    server = forkserver.ForkServer(sys.executable, env, preload=False)
    with open(tmp_path / "log", "w") as log:
        assert server.run(["-m", "fs_stage", "exit", "0"], log.fileno()) == 0
    assert (tmp_path / "log").read_text() == "fresh\n"
    server.close(wait=False)
    assert server.process.wait(timeout=30) == 0
    with pytest.raises(ValueError, match="only -m MODULE"):
        server.run(["-c", "pass"])


# two trainings and two samplings, one of each in fresh interpreters
@pytest.mark.slow(about=30)
def test_a_real_training_and_sampling_give_the_same_bytes_forked_or_fresh(tiny_model_dir,
                                                                           tmp_path):
    # the recipes' stages are forked by default; a GPU run, PRELOAD=0 and the original's
    # commands start each one fresh: the files must not depend on which
    data = trajectories(tmp_path / "traj.jsonl")
    results = {}
    for preload in (True, False):
        out = tmp_path / f"sft_{preload}"
        run = Scheduler(1, 1, str(tmp_path / "logs"), preload=preload)
        run.stage("train_sft", "--pretrain", tiny_model_dir, "--dataset", str(data),
                  "--save_path", str(out), "--max_epochs", "2", "--train_batch_size", "2",
                  "--micro_train_batch_size", "1", "--learning_rate", "1e-3", "--seed", "0")
        with open(out / "model.safetensors", "rb") as handle:
            weights = hashlib.sha256(handle.read()).hexdigest()
        losses = [json.loads(line)["loss"] for line in open(out / "metrics.jsonl")]
        # candidates sampled at temperature 1.0: the generators' seeding and the sampler's
        # arithmetic, from the model just trained
        sampled = tmp_path / f"sampled_{preload}.jsonl"
        run.stage("sample_best_of_n", str(data), str(sampled), "--agent_model", str(out),
                  "--best_of_n", "4", "--max_new_tokens", "12", "--temperature", "1.0",
                  "--seed", "0")
        results[preload] = (weights, losses, sampled.read_bytes())
    assert len(results[True][1]) == 2 and results[True][2].count(b"\n") == 6  # 3 rows x 2 turns
    assert results[True] == results[False]
