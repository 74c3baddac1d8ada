"""simulate -> evaluate through the scripts' ``main`` on the bundled tasks with the tiny model,
resume after a killed run, and bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code
from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.data.tasks import load_tasks
from sweet_rl.io import read_jsonl
from sweet_rl.records import RecordError, Trajectory

FAST = dict(max_new_tokens=8, simulator_max_tokens=8, max_steps=2, device="cpu")


def _simulate(tiny, out, **kw):
    args = dict(agent_model=tiny, env_model=tiny, output_path=str(out), **FAST)
    args.update(kw)
    return simulate(SimulateOptions(**args))


def test_simulate_then_evaluate_on_bundled_tasks(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "traj.jsonl"
    _simulate(tiny_model_dir, out, num_tasks=3, best_of_n=2, batch_size=4)
    tasks = load_tasks(None, 3)
    rows = read_jsonl(str(out), Trajectory.from_dict)
    assert len(rows) == 6
    for r, traj in enumerate(rows):
        assert traj.task.problem_description == tasks[r % 3].problem_description  # i + j*num_tasks
        assert traj.dialogue_history[0].content == tasks[r % 3].problem_description
        assert 1 <= len(traj.assistant_turns) <= 2
        for turn in traj.assistant_turns:
            assert turn.input.startswith("<|begin_of_text|>") and turn.output is not None
    assert "simulate: 6 dialogues" in capsys.readouterr().out
    sidecar = json.loads((tmp_path / "traj.jsonl.config.json").read_text())
    assert sidecar["stages"]["simulate"]["best_of_n"] == 2

    metrics = evaluate_code(EvaluateCodeOptions(
        saved_path=str(out), k=2, ground_truth_preference_path=str(tmp_path / "p.jsonl")
                                                ))
    graded = read_jsonl(str(out), Trajectory.from_dict)
    assert all(t.reward is not None and 0.0 <= t.reward <= 1.0 for t in graded)
    assert all(t.extra["grader_rules"] == "benchmark" for t in graded)
    assert metrics["success"] == 100.0 * sum(
        max(graded[i].reward, graded[i + 3].reward) >= 1 for i in range(3)) / 3
    assert "best-of-2 tests passed" in capsys.readouterr().out
    assert (tmp_path / "p.jsonl").exists()


def _answer_row(task, answer):
    prompt = f"<|begin_of_text|>...{task.problem_description}..."
    return {
        "task": task.to_dict(),
        "dialogue_history": [
            {"role": "user", "content": task.problem_description},
            {
                "role": "assistant",
                "content": "I WANT TO ANSWER: " + answer,
                "input": prompt,
                "output": "OUTPUT: I WANT TO ANSWER: " + answer,
            },
        ],
        "answer": answer,
    }


def test_evaluate_scores_answers_and_writes_both_pair_files(tmp_path, capsys):
    tasks = load_tasks(None, 2)
    right = [f"```python\n{t.ground_truth}\n```" for t in tasks]
    rows = [_answer_row(tasks[0], right[0]), _answer_row(tasks[1], "def nothing(): pass"),
            _answer_row(tasks[0], "def shipping_cost(w, z):\n    return 4.0"),
            _answer_row(tasks[1], right[1])]
    path = tmp_path / "traj.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = evaluate_code(EvaluateCodeOptions(
        saved_path=str(path), k=2, preference_path=str(tmp_path / "plain.jsonl"),
        ground_truth_preference_path=str(tmp_path / "gt.jsonl")))
    rewards = [t.reward for t in read_jsonl(str(path), Trajectory.from_dict)]
    assert rewards[0] == 1.0 and rewards[1] == 0.0 and rewards[3] == 1.0
    assert rewards[2] == 0.1  # 4.0 is right for the light local parcel only: 1 test of 10
    assert metrics == {"correctness": 100.0, "success": 100.0, "pairs": 2}
    # our line first, then the original's lines in its format: over all rows
    # (1 + 0 + 0.1 + 1) / 4 = 0.525 and 2 of 4 rows at 1; best-of-2 per task max(1, 0.1) and
    # max(0, 1), both 1; two pairs (each task's rollout at 1 against the worse one)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "evaluate_code: 4 trajectories (2 tasks x 2), best-of-2 tests passed 100.0%"
    )
    assert out[1:] == [
        "Average correctness: 0.525",
        "Number of trajectories: 4",
        "Percentage of correct trajectories: 0.5",
        "Best-of-2 Average correctness: 1.0",
        "Best-of-2 percentage of correct trajectories: 1.0",
        "Number of preference pairs: 2",
    ]
    plain = read_jsonl(str(tmp_path / "plain.jsonl"))
    gt = read_jsonl(str(tmp_path / "gt.jsonl"))
    first = rows[0]["dialogue_history"][-1]
    assert plain[0] == {
        "chosen": first["input"] + first["output"],
        "rejected": rows[2]["dialogue_history"][-1]["input"]
        + rows[2]["dialogue_history"][-1]["output"],
    }
    prefix = f"In light that the final answer is: {tasks[0].ground_truth}."
    assert (
        gt[0]["chosen"] == prefix + plain[0]["chosen"]
        and gt[0]["rejected"] == prefix + plain[0]["rejected"]
    )
    assert gt[1]["chosen"].startswith(
        f"In light that the final answer is: {tasks[1].ground_truth}."
    )
    # A second run reuses the rewards instead of grading again (and writes no pairs).
    evaluate_code(EvaluateCodeOptions(saved_path=str(path), k=2))
    out = capsys.readouterr().out
    assert (
        "graded 0" in out
        and "Average correctness: 0.525\n" in out
        and "preference pairs:" not in out
    )


def test_evaluate_rejects_a_layout_that_does_not_match_k(tmp_path):
    tasks = load_tasks(None, 2)
    path = tmp_path / "traj.jsonl"
    rows = [_answer_row(tasks[0], "x"), _answer_row(tasks[1], "x"), _answer_row(tasks[1], "x"),
            _answer_row(tasks[0], "x")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = path.read_text()
    with pytest.raises(RecordError, match=r"traj.jsonl, line 3: field 'task.problem_description'"):
        evaluate_code(EvaluateCodeOptions(saved_path=str(path), k=2))
    assert path.read_text() == before


@pytest.mark.slow
def test_killed_run_resumes_with_every_row_exactly_once(tiny_model_dir, tmp_path, repo_root):
    out = tmp_path / "traj.jsonl"
    script = str(repo_root / "scripts" / "simulate_interactions.py")
    cmd = [
        sys.executable,
        script,
        "--agent_model",
        tiny_model_dir,
        "--env_model",
        tiny_model_dir,
        "--output_path",
        str(out),
        "--num_tasks",
        "3",
        "--best_of_n",
        "2",
        "--batch_size",
        "1",
        "--max_new_tokens",
        "8",
        "--simulator_max_tokens",
        "8",
        "--max_steps",
        "2",
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    lines_before = out.read_text().count("\n")
    assert 2 <= lines_before < 6, "the run should have been killed part way"
    with open(out, "ab") as handle:  # and leave a torn record, as a kill mid-write would
        handle.write(b'{"task": {"problem_desc')
    _simulate(tiny_model_dir, out, num_tasks=3, best_of_n=2, batch_size=1, to_continue=True)
    rows = read_jsonl(str(out), Trajectory.from_dict)
    tasks = load_tasks(None, 3)
    assert [t.task.problem_description for t in rows] == [
        tasks[r % 3].problem_description for r in range(6)
    ]


def test_bad_input_fails_clearly_and_leaves_outputs_alone(tiny_model_dir, tmp_path, repo_root):
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(
        '{"problem_description": "p", "ground_truth": "g"}\n'
        '{"problem_description": 3, "ground_truth": "g"}\n'
    )
    out = tmp_path / "traj.jsonl"
    out.write_text('{"keep": "me"}\n')
    with pytest.raises(
        RecordError, match=r"tasks.jsonl, line 2: field 'problem_description': expected str"
    ):
        _simulate(tiny_model_dir, out, input_path=str(bad), overwrite=True)
    with pytest.raises(FileExistsError, match="--to_continue"):
        _simulate(tiny_model_dir, out)
    # Resuming a file made from other tasks is refused, naming the line.
    with pytest.raises(RecordError, match="line 1"):
        _simulate(tiny_model_dir, out, to_continue=True)
    assert out.read_text() == '{"keep": "me"}\n'
    # Through the script: exit status 2 and one clear line on stderr.
    script = str(repo_root / "scripts" / "simulate_interactions.py")
    result = subprocess.run(
        [
            sys.executable,
            script,
            "--input_path",
            str(bad),
            "--output_path",
            str(out),
            "--overwrite",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "tasks.jsonl, line 2: field 'problem_description'" in result.stderr
    assert out.read_text() == '{"keep": "me"}\n'
    result = subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "evaluate_code.py"), str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "line 1: field 'task': missing" in result.stderr
