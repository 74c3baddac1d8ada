"""The miniature reproduction (scripts/run_mini_reproduction.sh, ``sweet-rl mini run``) at a
reduced size: every stage of every method runs from the warm agent with the real stages and
files, and the table and Best-of-N curve come out.

This checks the wiring only (a 12-task, one-epoch warm agent learns nothing); whether the
methods learn is what the full run measures (docs/mini_reproduction.md)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from sweet_rl.io import read_jsonl

pytestmark = pytest.mark.slow(about=130)  # every stage of every method, reduced (minutes)

METHODS = ("zero_shot", "rft", "multiturn_dpo", "sweet", "sweet_no_gt", "sweet_sum")


def test_reduced_reproduction_runs_every_method(tmp_path, repo_root, tiny_model_dir):
    from sweet_rl.recipes.mini.dialogues import STYLES, build_mini_trajectories
    from sweet_rl.recipes.mini.tasks import generate_tasks
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.io import write_jsonl

    # offline data in which every task has a success (asker) and failures (guesser, waster):
    # a one-epoch warm agent never succeeds, and pairs need both
    offline = tmp_path / "offline.jsonl"
    write_jsonl(str(offline), build_mini_trajectories(load_tokenizer(tiny_model_dir),
                                                      generate_tasks(3, 0, "train"), STYLES))
    out = tmp_path / "repro"
    # JOBS=2: the stages run side by side, as on a 2-core machine
    env = dict(os.environ, OUT=str(out), SEEDS="0", TRAIN_TASKS="12", EPOCHS="1", DRILLS="8",
               OFFLINE_FROM=str(offline), COPY_MIN="0",
               TEST_TASKS="2", K=str(len(STYLES)), NUM_SAMPLES="2", DATA_FRACTION="1.0",
               MAX_NEW_TOKENS="24", TRAJ_EPOCHS="1", SFT_EPOCHS="1", EVAL_ROLLOUTS="1",
               BON_NS="2", PYTHON="python", JOBS="2")
    result = subprocess.run(["bash", "scripts/run_mini_reproduction.sh"], cwd=repo_root,
                            env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]

    seed = out / "seed0"
    for method in METHODS:
        rows = list(read_jsonl(str(seed / f"eval_{method}.jsonl")))
        assert len(rows) == 2 and all("reward" in row for row in rows), method
    for model in ("rft", "multiturn_dpo", "sweet", "sweet_no_gt", "sweet_sum", "critic_sweet",
                  "critic_sweet_no_gt", "critic_sweet_sum", "critic_regression",
                  "critic_value"):
        assert (seed / model / "config.json").exists(), model
    # the ablations' critics are trained and used as the flags say
    no_gt = json.loads((seed / "ranked_sweet_no_gt.jsonl.config.json").read_text())
    assert no_gt["stages"]["rank_best_of_n"]["no_use_ground_truth"] is True
    summed = json.loads((seed / "ranked_sweet_sum.jsonl.config.json").read_text())
    assert summed["stages"]["rank_best_of_n"]["use_sum"] is True
    table = (out / "table.md").read_text()
    for label in ("Zero-shot (warm agent)", "Rejection fine-tuning", "Multi-turn DPO",
                  "SWEET-RL w/o training-time info", "SWEET-RL w/ sum instead of mean",
                  "| SWEET-RL |", "Best-of-N success %", "whole run:", "regression head",
                  "value function", "LLM-as-a-Judge"):
        assert label in table, label
    assert table in result.stdout
    # every step's output is in its own log, and the run says when each started and ended
    assert (out / "logs" / "seed0.critic_sweet.log").exists()
    assert "done  seed0.sweet" in result.stdout

    # one stage at a time (the first run had two side by side), from the same warm agent:
    # the same files, whatever ran beside what (forked or fresh stages give the same bytes:
    # tests/recipes/mini/test_forkserver.py)
    serial = tmp_path / "serial"
    env.update(OUT=str(serial), WARM=str(out / "warm"), JOBS="1", METHODS="sweet", BON_NS="")
    result = subprocess.run(["bash", "scripts/run_mini_reproduction.sh"], cwd=repo_root,
                            env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    for name in ("offline.jsonl", "critic_pairs.jsonl", "sampled.jsonl", "ranked_sweet.jsonl",
                 "agent_pairs_sweet.jsonl", "eval_zero_shot.jsonl", "eval_sweet.jsonl"):
        assert (serial / "seed0" / name).read_bytes() == (seed / name).read_bytes(), name
