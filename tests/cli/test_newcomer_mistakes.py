"""A newcomer's mistakes get a clear answer before any work or data is lost:
--overwrite against a dead server, a model name the server does not serve, a run whose
dialogues all end in simulator errors, and --num_tasks out of range."""

from __future__ import annotations

import json
import logging
import os

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.models.openai_compat import EndpointUnavailable, ModelNotServed
from tests.serve_helpers import free_port
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step

FLAGS = dict(num_tasks=2, max_steps=2, max_new_tokens=4, simulator_max_tokens=8, device="cpu")


def _old_output(tmp_path):
    out = tmp_path / "traj.jsonl"
    out.write_text('{"keep": "me"}\n', encoding="utf-8")
    (tmp_path / "traj.jsonl.config.json").write_text('{"stages": {"old": {}}}\n')
    return out


def _untouched(tmp_path, out):
    assert out.read_text() == '{"keep": "me"}\n'
    assert (tmp_path / "traj.jsonl.config.json").read_text() == '{"stages": {"old": {}}}\n'
    assert sorted(os.listdir(tmp_path)) == ["traj.jsonl", "traj.jsonl.config.json"]


def test_overwrite_with_a_dead_server_leaves_the_old_output_and_sidecar(tiny_model_dir,
                                                                       tmp_path):
    out = _old_output(tmp_path)
    with pytest.raises(EndpointUnavailable, match="no OpenAI-compatible server reachable"):
        simulate(SimulateOptions(agent_model=tiny_model_dir, hostname="127.0.0.1", port=free_port(),
                                 env_model="fake", output_path=str(out), overwrite=True, **FLAGS))
    _untouched(tmp_path, out)


def test_overwrite_replaces_output_and_sidecar_once_the_run_is_complete(tiny_model_dir,
                                                                        tmp_path):
    out = _old_output(tmp_path)
    with FakeOpenAIServer([Step()]) as server:
        simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=server.base_url,
                                 env_model="fake",
                                 output_path=str(out), overwrite=True, **FLAGS))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all("dialogue_history" in row for row in rows)
    sidecar = json.loads((tmp_path / "traj.jsonl.config.json").read_text())
    assert set(sidecar["stages"]) == {"simulate"}  # the old file's entry went with it
    assert sorted(os.listdir(tmp_path)) == ["traj.jsonl", "traj.jsonl.config.json"]


def test_a_model_name_the_server_does_not_serve_stops_before_any_work(tiny_model_dir,
                                                                      tmp_path):
    out = _old_output(tmp_path)
    with FakeOpenAIServer([Step()], models=("Qwen/Qwen2.5-0.5B-Instruct",)) as server:
        with pytest.raises(ModelNotServed, match=r"does not serve a model named "
                                                 r"'meta-llama/Llama-3.1-70B-Instruct'; it "
                                                 r"serves: Qwen/Qwen2.5-0.5B-Instruct"):
            simulate(SimulateOptions(
                agent_model=tiny_model_dir, hostname=server.base_url,
                env_model="meta-llama/Llama-3.1-70B-Instruct", output_path=str(out), overwrite=True,
                **FLAGS))
        assert server.attempts == 0  # not one dialogue request was sent
    _untouched(tmp_path, out)


def test_a_run_whose_dialogues_end_in_simulator_errors_fails(tiny_model_dir, tmp_path):
    # a server without a model list (nothing to check at start) that refuses every request
    out = tmp_path / "traj.jsonl"
    refused = Step(400, body={"error": {"message": "model 'x' is not served"}})
    with FakeOpenAIServer([refused], models=()) as server:
        with pytest.raises(ValueError, match=r"2 of 2 dialogues in .*traj.jsonl ended with "
                                             r"simulator errors \(more than --max_error_share "
                                             r"0.1\); the first: simulator: HTTP 400"):
            simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=server.base_url,
                                     env_model="x",
                                     output_path=str(out), **FLAGS))
        assert len(out.read_text().splitlines()) == 2  # the rows stay, for a look
        simulate(SimulateOptions(
            agent_model=tiny_model_dir, hostname=server.base_url, env_model="x",
            output_path=str(out), overwrite=True, max_error_share=1.0, **FLAGS))


def test_num_tasks_out_of_range(tiny_model_dir, tmp_path, caplog):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"problem_description": f"p{i}", "ground_truth": "g"})
                             + "\n" for i in range(2)))
    with pytest.raises(ValueError, match=r"--num_tasks must be a positive number of tasks "
                                         r"\(or None for all\), got -1"):
        simulate(SimulateOptions(agent_model=tiny_model_dir, input_path=str(tasks), num_tasks=-1,
                                 output_path=str(tmp_path / "a.jsonl")))
    assert not (tmp_path / "a.jsonl").exists()
    out = tmp_path / "b.jsonl"
    flags = dict(FLAGS, num_tasks=50)
    with caplog.at_level(logging.WARNING):
        simulate(SimulateOptions(agent_model=tiny_model_dir, env_model=tiny_model_dir,
                                 input_path=str(tasks), output_path=str(out), **flags))
    assert "--num_tasks 50: " in caplog.text and "holds only 2 tasks; using all 2" in caplog.text
    stage = json.loads((tmp_path / "b.jsonl.config.json").read_text())["stages"]["simulate"]
    assert stage["num_tasks"] == 50 and stage["num_tasks_used"] == 2


def test_tests_that_need_the_real_colbench_files_skip_naming_them(tmp_path, repo_root):
    import subprocess
    import sys

    # a checkout without ../shared beside it: those tests skip with a message, none errors
    tests = ["tests/grading/test_conformance.py",
             "tests/environments/test_leaks.py::test_real_colbench_requests_sent_back_do_not_leak",
             "tests/data/test_websight.py::test_published_tasks_are_already_rewritten"]
    env = dict(os.environ, SWEET_RL_COLBENCH=str(tmp_path / "nowhere"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p",
                             "no:cacheprovider", *tests], cwd=repo_root, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "passed" not in result.stdout.splitlines()[-1]
    missing = str(tmp_path / "nowhere" / "backend_test.jsonl")
    assert f"{missing} is missing: this test needs the real ColBench file backend_test.jsonl" \
        in result.stdout
    assert "frontend_test.jsonl is missing" in result.stdout


@pytest.mark.slow
def test_a_stage_shows_its_bar_and_metrics_not_one_log_line_per_request(tiny_model_dir,
                                                                        tmp_path, repo_root):
    import subprocess
    import sys

    def run(*extra):
        command = [sys.executable, str(repo_root / "scripts" / "simulate_interactions.py"),
                   "--agent_model", tiny_model_dir, "--hostname", server.base_url,
                   "--env_model", "fake", "--output_path", str(tmp_path / f"{len(extra)}.jsonl"),
                   "--num_tasks", "2", "--max_steps", "2", "--max_new_tokens", "4", *extra]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    with FakeOpenAIServer([Step()]) as server:
        quiet, loud = run(), run("-v")
        wrong = run("--log_level", "LOUD")
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stderr[-2000:]
    assert "simulate: 2 dialogues" in quiet.stdout
    for noise in ("HTTP Request", "Setting accelerator to CPU"):
        assert noise not in quiet.stdout + quiet.stderr
    assert "HTTP Request" in loud.stderr  # -v shows the libraries' INFO lines
    assert wrong.returncode == 2 and "--log_level must be one of DEBUG, INFO, WARNING, " \
        "ERROR, got 'LOUD'" in wrong.stderr


def test_a_hub_download_failure_names_the_file_and_the_repository(tmp_path):
    from sweet_rl.data.tasks import load_tasks

    # the tests run with HF_HUB_OFFLINE=1: the download fails at once, as without a network
    with pytest.raises(OSError, match=r"cannot download backend_tasks/test.jsonl from the hub "
                                      r"dataset facebook/collaborative_agent_bench \("):
        load_tasks("hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl", 2,
                   cache_dir=str(tmp_path / "hub"))


def test_sample_and_rank_overwrite_only_when_the_new_output_is_complete(tiny_model_dir,
                                                                        tmp_path):
    from sweet_rl.recipes.mini.dialogues import build_mini_trajectories
    from sweet_rl.recipes.mini.tasks import generate_tasks
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.io import write_jsonl
    from sweet_rl.stages.rank import RankOptions, rank
    from sweet_rl.stages.sample import SampleOptions, sample
    from tests.stepwise.test_judges import _steps

    steps = _steps(tmp_path)  # step records, for rank
    dialogues = tmp_path / "offline.jsonl"  # graded trajectories, for sample
    played = build_mini_trajectories(load_tokenizer(tiny_model_dir),
                                     generate_tasks(1, 0, "train"), ("asker",))
    write_jsonl(str(dialogues), [dict(t.to_dict(), reward=1.0) for t in played])
    out = _old_output(tmp_path)
    for stage, options, given, flags in (
            (rank, RankOptions, steps, dict(model_id=str(tmp_path / "no-critic"))),
            (sample, SampleOptions, dialogues, dict(agent_model=str(tmp_path / "no-agent")))):
        with pytest.raises(OSError):  # the model cannot be loaded: after the input was read
            stage(options(input_path=str(given), output_path=str(out), overwrite=True, **flags))
        assert out.read_text() == '{"keep": "me"}\n'
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "offline.jsonl", "sampled.jsonl", "traj.jsonl", "traj.jsonl.config.json"]
    rank(RankOptions(input_path=str(steps), output_path=str(out), overwrite=True,
                     critic_type="random"))
    assert "judge_result" in out.read_text()
    stages = json.loads((tmp_path / "traj.jsonl.config.json").read_text())["stages"]
    assert set(stages) == {"rank_best_of_n"}


def test_evaluate_names_rows_with_simulator_errors_and_can_skip_them(tmp_path, capsys):
    from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code

    task = {"problem_description": "add", "ground_truth": "def f(a, b):\n    return a + b",
            "test_cases": {"test1": "f(1, 2)", "test2": "f(2, 2)"}}
    right = {"task": task, "answer": "def f(a, b):\n    return a + b", "dialogue_history": [
        {"role": "user", "content": "add"}]}
    cut = dict(right, task=dict(task, problem_description="add again"),
               simulator_errors=["simulator: HTTP 400: model 'x' is not served"])
    path = tmp_path / "traj.jsonl"
    path.write_text(json.dumps(right) + "\n" + json.dumps(cut) + "\n")
    evaluate_code(EvaluateCodeOptions(saved_path=str(path), workers=1))
    out = capsys.readouterr().out
    assert "evaluate_code: warning: 1 of 2 rows carry a simulator error" in out
    assert "2 trajectories (2 tasks x 1)" in out
    metrics = evaluate_code(EvaluateCodeOptions(saved_path=str(path), workers=1, skip_errors=True))
    out = capsys.readouterr().out
    assert "1 trajectories (1 tasks x 1)" in out and "skipped 1 rows with simulator errors" in out
    assert metrics["skipped_errors"] == 1 and metrics["success"] == 100.0


@pytest.mark.slow(about=50)
def test_the_readme_local_server_recipe_works_when_pasted(tmp_path, repo_root):
    """The README's "Run against a local simulator server" commands, as written (but the
    install line, already done here), on a free port, in an empty folder."""
    import re
    import shlex
    import signal
    import subprocess
    import sys
    import time

    from tests.serve_helpers import _healthy

    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    block = readme.split("**Run against a local simulator server**")[1].split("```bash")[1]
    block = block.split("```")[0].replace("\\\n", " ")
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()]
    commands = [c for c in commands if c and not c.startswith("pip install")]
    assert [c.split()[0:2] for c in commands] == [["python", "-m"], ["transformers", "serve"],
                                                  ["python", "scripts/simulate_interactions.py"]]
    port = str(free_port())
    build, serve, run = (shlex.split(c.replace("8000", port).rstrip("&").strip())
                         for c in commands)
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable] + build[1:], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=300)
    serve = [sys.executable, "-m", "transformers.cli.transformers"] + serve[1:]
    server = subprocess.Popen(serve, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not _healthy(f"http://127.0.0.1:{port}/health") and time.monotonic() < deadline:
            time.sleep(0.5)
        run[1] = str(repo_root / run[1])
        result = subprocess.run([sys.executable] + run[1:], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=600)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "simulate: 2 dialogues" in result.stdout
    assert (tmp_path / "outputs" / "local.jsonl").exists()
