"""The warm start of the miniature ColBench: the style mix, and a reduced run of the recipe
(scripts/build_mini_agent.sh) whose agent must follow the protocol on held-out tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from sweet_rl.recipes.mini.styles import assign_styles, parse_mix
from sweet_rl.environments.protocol import ANSWER_MARKER
from sweet_rl.io import read_jsonl
from sweet_rl.records import Trajectory


def test_the_mix_is_exact_and_seeded():
    styles = assign_styles(10, parse_mix("asker=0.4,guesser=0.3,waster=0.3"), seed=1)
    assert Counter(styles) == {"asker": 4, "guesser": 3, "waster": 3}
    assert styles == assign_styles(10, {"asker": 4, "guesser": 3, "waster": 3}, seed=1)
    assert styles != assign_styles(10, {"asker": 4, "guesser": 3, "waster": 3}, seed=2)
    # leftover places go to the largest remainders, and every place is filled
    assert Counter(assign_styles(7, {"asker": 1, "guesser": 1, "waster": 1})) == \
        {"asker": 3, "guesser": 2, "waster": 2}
    assert assign_styles(5, {"asker": 1, "waster": 0}) == ["asker"] * 5


def test_a_bad_mix_is_refused():
    with pytest.raises(ValueError, match="unknown style"):
        parse_mix("asker=1,lurker=1")
    with pytest.raises(ValueError, match="positive sum"):
        parse_mix("asker=0")


def test_warm_start_data_has_each_style_with_the_graders_view(tiny_model_dir):
    from sweet_rl.recipes.mini.tasks import generate_tasks
    from sweet_rl.recipes.mini.styles import build_warm_start_trajectories
    from sweet_rl.models.hf_generation import load_tokenizer

    tasks = generate_tasks(6, seed=3)
    rows, styles = build_warm_start_trajectories(load_tokenizer(tiny_model_dir), tasks,
                                                 {"asker": 1, "guesser": 1, "waster": 1})
    assert [r.task.ground_truth for r in rows] == [t.ground_truth for t in tasks]
    for row, style in zip(rows, styles):
        agent = [t for t in row.dialogue_history if t.role == "assistant"]
        assert ANSWER_MARKER in agent[-1].output
        assert (len(agent) == 1) == (style == "guesser")  # guessers answer at once
        assert style != "asker" or row.answer.strip().endswith("```")


def test_the_warm_start_stage_restricts_families_and_keeps_its_agent_prompt(tmp_path):
    from sweet_rl.recipes.mini.warm_start import WarmStartOptions, warm_start
    from sweet_rl.recipes.mini import AGENT_PROMPT

    out = tmp_path / "quick"
    warm_start(WarmStartOptions(output_dir=str(out), num_train_tasks=6, num_test_tasks=3,
                                hidden_size=32, num_drills=2, families=["late_fee"],
                                agent_prompt_path="mini"))
    short = open(AGENT_PROMPT, encoding="utf-8").read()
    assert (out / "agent_prompt.txt").read_text(encoding="utf-8") == short
    for name in ("train_tasks.jsonl", "test_tasks.jsonl"):
        assert {row["mini_family"] for row in read_jsonl(str(out / name))} == {"late_fee"}
    dialogues = read_jsonl(str(out / "warm_start.jsonl"), Trajectory.from_dict)
    drills = read_jsonl(str(out / "drills.jsonl"), Trajectory.from_dict)
    for row in dialogues + drills:
        for turn in row.dialogue_history:
            assert turn.role == "user" or (short.strip() in turn.input and "Only the text" not in
                                           turn.input)
    with pytest.raises(ValueError, match="unknown families"):
        WarmStartOptions(output_dir=str(tmp_path / "bad"), families=["late_fee", "fees"])
    assert not (tmp_path / "bad").exists()  # refused before any work


# the warm-start recipe end to end, reduced (minutes)
@pytest.mark.slow(about=30)
def test_reduced_warm_start_follows_the_protocol(tmp_path, repo_root):
    """A small warm start through the real stages: its agent, at temperature 1.0, ends most
    held-out dialogues with the answer marker (the code itself may be wrong: too few steps)."""
    out = tmp_path / "mini"
    # hidden 64 with 60 updates was too few (loss ~1, no dialogue ended): about 150 updates
    # of the default width are what the full recipe needed to reach a loss near 0.1
    env = dict(os.environ, OUT=str(out), TRAIN_TASKS="40", TEST_TASKS="4", HIDDEN="128",
               EPOCHS="15", LR="5e-3", MIX="asker=0.5,guesser=0.5", MAX_NEW_TOKENS="48",
               # the setting this test was tuned on: no recall drills, untied embeddings
               DRILLS="0", TIE="False", BATCH="4",
               COPY_MIN="0",  # so few updates never learn the copy: no check, one training
               PYTHON=sys.executable)
    result = subprocess.run(["bash", str(repo_root / "scripts" / "build_mini_agent.sh")],
                            env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_jsonl(str(out / "test.jsonl"), Trajectory.from_dict)
    assert len(rows) == 4
    ended = [row for row in rows
             if ANSWER_MARKER in [t for t in row.dialogue_history if t.role == "assistant"][-1]
             .output]
    assert len(ended) >= 3, [row.dialogue_history[-1].content for row in rows]


def test_the_warm_start_stage_writes_the_followup_family(tmp_path):
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.recipes.mini.warm_start import WarmStartOptions, warm_start

    out = tmp_path / "followup"
    warm_start(WarmStartOptions(output_dir=str(out), num_train_tasks=8, num_test_tasks=3,
                                num_valid_tasks=2, hidden_size=32, num_drills=3,
                                family="followup", mix="thorough=1,skipper=1",
                                agent_prompt_path="mini"))
    counts = {name: len(read_jsonl(str(out / name))) for name in (
        "train_tasks.jsonl", "test_tasks.jsonl", "valid_tasks.jsonl", "drills.jsonl")}
    assert counts == {"train_tasks.jsonl": 8, "test_tasks.jsonl": 3, "valid_tasks.jsonl": 2,
                      "drills.jsonl": 3}
    for name in ("train_tasks.jsonl", "valid_tasks.jsonl"):
        assert {row["mini_family"] for row in read_jsonl(str(out / name))} == {"followup"}
    dialogues = read_jsonl(str(out / "warm_start.jsonl"), Trajectory.from_dict)
    turns = Counter(sum(t.role == "assistant" for t in row.dialogue_history) for row in dialogues)
    assert turns == {4: 4, 3: 4}  # four thorough dialogues, four skippers
    # the tokenizer learnt both the family's words and the basic ones its drills use
    tokenizer = load_tokenizer(str(out / "base"))
    assert len(tokenizer(" SURCHARGE")["input_ids"]) == 1
    assert len(tokenizer(" THRESHOLD")["input_ids"]) == 1
    for bad, match in (({"family": "folowup"}, "must be one of basic, followup"),
                       ({"family": "followup", "families": ["late_fee"]}, "--families picks"),
                       ({"num_valid_tasks": 2}, "--num_valid_tasks needs --family followup"),
                       ({"family": "followup", "mix": "asker=1"}, "unknown style 'asker'")):
        with pytest.raises(ValueError, match=match):
            WarmStartOptions(output_dir=str(tmp_path / "bad"), **bad)
        assert not (tmp_path / "bad").exists()  # refused before any work
