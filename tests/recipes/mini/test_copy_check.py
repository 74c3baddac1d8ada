"""The warm-start copy check (sweet_rl/recipes/mini/copy_check.py) and build_mini_agent.sh's
trainings until it passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sweet_rl.recipes.mini.copy_check import CopyCheckOptions, copied, copy_check
from sweet_rl.recipes.mini.tasks import generate_tasks
from sweet_rl.io import write_jsonl

REFERENCE = generate_tasks(1, 0, "train")[0].ground_truth


def test_an_answer_counts_when_its_code_is_the_references():
    body = REFERENCE.split("```python")[-1]
    assert copied("I WANT TO ANSWER:\n```python\n" + body + "\n```", REFERENCE)
    # comments and blank lines aside: the comment's wording does not decide
    assert copied("```python\n" + "\n".join(line for line in body.splitlines()
                                             if not line.strip().startswith("#")) + "\n```",
                  REFERENCE)
    # one constant off, or no code at all, does not count
    name, value = next((line.split(" = ") for line in body.splitlines()
                        if " = " in line and line.strip()[:1].isupper()))
    wrong = body.replace(f"{name} = {value}", f"{name} = {value}0", 1)
    assert wrong != body and not copied("```python\n" + wrong + "\n```", REFERENCE)
    assert not copied("What is the fee?", REFERENCE)


def test_the_check_plays_told_dialogues_with_the_real_agent(tiny_model_dir, tmp_path):
    # the tiny random model copies nothing; the check still plays every task with the given
    # system message and records the share
    tasks, prompt = tmp_path / "train_tasks.jsonl", tmp_path / "agent_prompt.txt"
    write_jsonl(str(tasks), generate_tasks(3, 0, "train", ["late_fee"]))
    prompt.write_text("Ask, then answer.", encoding="utf-8")
    out = tmp_path / "copy_check.json"
    summary = copy_check(CopyCheckOptions(agent_model=tiny_model_dir, tasks=str(tasks),
                                          num_tasks=5, agent_prompt_path=str(prompt),
                                          max_new_tokens=4, output_path=str(out)))
    assert summary == {"copied": 0, "checked": 3, "share": 0.0}
    assert json.loads(out.read_text()) == summary
    sidecar = json.loads((tmp_path / "copy_check.json.config.json").read_text())
    assert sidecar["stages"]["mini_copy_check"]["agent_prompt_path"] == str(prompt)


def test_a_file_of_followup_tasks_is_checked_on_the_thorough_dialogue(tiny_model_dir,
                                                                     tmp_path):
    from sweet_rl.recipes.mini.followup_tasks import generate_tasks as followup_tasks

    tasks = tmp_path / "train_tasks.jsonl"
    write_jsonl(str(tasks), followup_tasks(2, 0))
    # the basic asker cannot play these tasks (no such family among the basic ones): the check
    # gets this far only on the followup family's own dialogue
    summary = copy_check(CopyCheckOptions(agent_model=tiny_model_dir, tasks=str(tasks),
                                          max_new_tokens=4))
    assert summary == {"copied": 0, "checked": 2, "share": 0.0}
    # the thorough style's answer is the reference: an agent that wrote it would count
    from sweet_rl.recipes.mini.followup_dialogues import agent_turns
    from sweet_rl.records import Task

    task = Task.from_dict(json.loads(tasks.read_text().splitlines()[0]))
    assert copied(agent_turns(task, "thorough")[-1], task.ground_truth)
    assert not copied(agent_turns(task, "guesser")[-1], task.ground_truth)


def _build(tmp_path, repo_root, copy_min, tries, **more):
    env = dict(os.environ, OUT=str(tmp_path / "mini"), TRAIN_TASKS="4", TEST_TASKS="1",
               HIDDEN="32", EPOCHS="1", DRILLS="2", MEASURE="0", FAMILIES="late_fee",
               AGENT_PROMPT="mini", COPY_MIN=copy_min, TRIES=tries, PYTHON=sys.executable,
               JOBS="2", **more)
    return subprocess.run(["bash", str(repo_root / "scripts" / "build_mini_agent.sh")],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow(about=25)
def test_the_build_trains_again_until_the_agent_copies(tmp_path, repo_root):
    # a bar no agent reaches: every training is checked, then the build fails and says why
    result = _build(tmp_path, repo_root, "1.01", "2")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "training seed 0 did not learn the copy; training again with seed 1000" in \
        result.stdout
    assert result.stdout.count("mini_copy_check: 0 of 4 told dialogues") == 2
    assert "did not learn to copy told details (share below COPY_MIN=1.01) in 2 trainings" in \
        result.stderr


@pytest.mark.slow
def test_a_bar_that_is_met_keeps_the_first_training(tmp_path, repo_root):
    # every share meets it (0: no check); one try at a time from try 1: that one only is
    # trained, with its own training seed
    result = _build(tmp_path, repo_root, "-1", "3", TRIES_AT_ONCE="1", FIRST_TRY="1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("mini_copy_check:") == 1 and "training again" not in result.stdout
    assert "warm start: kept training seed 1000" in result.stdout
    assert json.loads((tmp_path / "mini" / "copy_check.json").read_text())["checked"] == 4
    assert sorted(p.name for p in (tmp_path / "mini" / "logs").glob("warm.sft_try*")) == [
        "warm.sft_try1.log"]
    training = json.loads((tmp_path / "mini" / "agent" / "training.config.json").read_text())
    assert training["stages"]["train_sft"]["seed"] == 1000  # the kept try became the agent
