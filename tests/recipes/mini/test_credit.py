"""The credit-assignment recipe (``sweet-rl mini credit``, scripts/run_mini_credit.sh): each
side's settings, what is refused before any work, and (slow) the followup family's wiring at a
reduced size: its turn limit, the data-scaling sweep, matched gradient steps and the property
check, with the real stages and files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from sweet_rl.io import read_jsonl
from sweet_rl.recipes.mini.credit import side_settings


def test_each_side_has_its_family_folder_and_matched_steps(tmp_path):
    out, sides = side_settings(["--seeds", "0"], {"OUT": str(tmp_path), "JOBS": "2",
                                                  "FOLLOWUP_OFFLINE_FROM": "f.jsonl"})
    assert out == str(tmp_path) and list(sides) == ["control", "followup"]
    control, followup = sides["control"], sides["followup"]
    assert (control.out, followup.out) == (str(tmp_path / "control"), str(tmp_path / "followup"))
    assert (control.family, control.families, control.test_tasks) == ("basic", ["late_fee"], 33)
    assert (followup.family, followup.families, followup.num_samples) == ("followup", None, 16)
    assert followup.fractions == control.fractions == ["1/3", "2/3"]  # both sides sweep
    assert control.match_steps and followup.match_steps
    assert (control.seeds, followup.seeds, control.jobs) == ([0], [0], 2)
    assert (control.offline_from, followup.offline_from) == (None, "f.jsonl")
    # both sides build their warm agents at once: one SFT try at a time on each
    assert control.tries_at_once == followup.tries_at_once == 1
    # about 500 held-out dialogues per method and seed on the followup side
    assert followup.test_tasks * followup.eval_rollouts == 501


def test_bad_settings_are_refused_before_any_work(tmp_path, repo_root):
    for env, said in (({"FAMILY": "followup"}, "fixed per side"),
                      ({"WARM": str(tmp_path / "w")}, "shared by both sides"),
                      ({"FRACTIONS": "2"}, "--fraction must be in")):
        run = subprocess.run(["bash", "scripts/run_mini_credit.sh"], cwd=repo_root,
                             env=dict(os.environ, OUT=str(tmp_path / "credit"),
                                      PYTHON=sys.executable, **env),
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 2 and said in run.stderr, run.stderr
    assert not (tmp_path / "credit").exists()


def test_both_sides_run_at_once_on_one_pool_and_both_tables_come_out(tmp_path, monkeypatch):
    # the orchestration only: each side's reproduction is replaced by one that records the
    # scheduler it was given and writes its table (the slow test below runs a real side)
    import threading

    from sweet_rl.recipes.mini import credit as recipe
    from sweet_rl.recipes.mini import reproduction

    from sweet_rl.recipes.mini import schedule

    seen, both_started, keys = {}, threading.Barrier(2, timeout=30), {}

    def fake_reproduce(s, run):
        seen[s.family] = run
        keys[s.family] = schedule._PRIORITY.key  # the followup side's stages go first
        both_started.wait()  # each side waits for the other: they run at once
        run.python_command(["-c", "pass"])  # a command in a slot of the shared pool
        os.makedirs(s.out, exist_ok=True)
        with open(os.path.join(s.out, "table.md"), "w") as handle:
            handle.write(f"| {s.family} table |\n")

    monkeypatch.setattr(reproduction, "reproduce", fake_reproduce)
    out, sides = side_settings([], {"OUT": str(tmp_path), "JOBS": "3"})
    text = recipe.credit(out, sides)
    assert seen["basic"].slots is seen["followup"].slots  # one pool of JOBS slots
    assert keys == {"followup": (0,), "basic": (1,)}
    assert seen["basic"].logs == str(tmp_path / "control" / "logs")
    assert text.startswith("## Control: the quick miniature (basic late_fee family)\n\n"
                           "| basic table |\n\n## The followup family\n\n| followup table |")
    assert re.search(r"\n\nboth: 0 min \d+ s\n\n## Where the time went\n\n", text)
    # both sides' commands in one ledger, against JOBS (3) slots over the wall time
    assert re.search(r"\| python -c \| 2 \| \d+\.\d \| 100\.0% \|", text)
    assert re.search(r"slot-minutes in commands: [\d.]+ of [\d.]+ \(3 slots x ", text)
    assert (tmp_path / "tables.md").read_text() == text


# the followup family's reduced run: every stage of three methods (minutes)
@pytest.mark.slow(about=50)
def test_reduced_followup_run_sweeps_and_matches_steps(tmp_path, repo_root, tiny_model_dir):
    from sweet_rl.io import write_jsonl
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.recipes.mini.followup_dialogues import build_followup_trajectories
    from sweet_rl.recipes.mini.followup_tasks import generate_tasks

    # offline data in which every task has a success (thorough) and failures: a one-epoch
    # warm agent never succeeds, and pairs need both
    offline = tmp_path / "offline.jsonl"
    write_jsonl(str(offline), build_followup_trajectories(
        load_tokenizer(tiny_model_dir), generate_tasks(4, 0), ("thorough", "skipper", "guesser")))
    out = tmp_path / "followup"
    env = dict(os.environ, OUT=str(out), FAMILY="followup", SEEDS="0", TRAIN_TASKS="8",
               EPOCHS="1", DRILLS="8", COPY_MIN="0", OFFLINE_FROM=str(offline), K="3",
               TEST_TASKS="2", NUM_SAMPLES="2", DATA_FRACTION="1.0", MAX_NEW_TOKENS="24",
               TRAJ_EPOCHS="1", SFT_EPOCHS="1", EVAL_ROLLOUTS="1", BON_NS="",
               METHODS="rft multiturn_dpo sweet", FRACTIONS="1/2", MATCH_STEPS="True",
               PYTHON=sys.executable, JOBS="2")
    result = subprocess.run(["bash", "scripts/run_mini_reproduction.sh"], cwd=repo_root,
                            env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    seed = out / "seed0"
    for method in ("zero_shot", "rft", "multiturn_dpo", "sweet", "multiturn_dpo_1of2",
                   "sweet_1of2"):
        rows = list(read_jsonl(str(seed / f"eval_{method}.jsonl")))
        assert len(rows) == 2 and all("reward" in row for row in rows), method
        # the followup family's tasks, and its turn limit
        assert all(row["task"]["mini_family"] == "followup" for row in rows), method
        assert all(sum(t["role"] == "assistant" for t in row["dialogue_history"]) <= 4
                   for row in rows), method

    def steps(name):
        log = (out / "logs" / f"seed0.{name}.log").read_text()
        return int(re.search(r"train_(?:dpo|sft): stage=\w+ examples=\d+ steps=(\d+)", log)[1])

    assert steps("rft") == steps("multiturn_dpo") == steps("sweet")
    assert steps("multiturn_dpo_1of2") == steps("sweet_1of2")
    # the sweep's part: the first two of the four offline tasks, with all their dialogues
    assert len(list(read_jsonl(str(seed / "offline_1of2.jsonl")))) == 6
    properties = json.loads((seed / "properties.json").read_text())
    assert properties["offline"]["tasks_with_success"] == 1.0  # every task has a thorough pass
    assert "turns" in json.loads((seed / "properties_sweet.json").read_text())[
        str(seed / "ranked_sweet.jsonl")]
    table = (out / "table.md").read_text()
    assert "| 1/2 |" in table and "| all |" in table
