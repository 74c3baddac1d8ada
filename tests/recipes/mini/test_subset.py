"""The data-scaling sweep's parts: the first tasks of an offline set with all their dialogues,
and the step records sampled from exactly those dialogues."""

import pytest

from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.recipes.mini.subset import SubsetOptions, subset, tag


def _offline(tmp_path, tokenizer_dir):
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.recipes.mini.followup_dialogues import build_followup_trajectories
    from sweet_rl.recipes.mini.followup_tasks import generate_tasks

    path = tmp_path / "offline.jsonl"
    rows = build_followup_trajectories(load_tokenizer(tokenizer_dir), generate_tasks(3, seed=0),
                                       ("thorough", "guesser"))
    for row in rows:
        row.reward = 1.0  # turn_records needs one; the part does not look at it
    write_jsonl(str(path), rows)
    return path


def _sampled(offline, rows_sampled):
    """Step records with one candidate each for the first ``rows_sampled`` rows."""
    from sweet_rl.records import Trajectory
    from sweet_rl.stepwise.turns import turn_records

    records = []
    for row in list(read_jsonl(str(offline)))[:rows_sampled]:
        for step in turn_records(Trajectory.from_dict(row)):
            record = step.to_dict()
            record["additional_outputs"] = [record["older_output"]]
            records.append(record)
    return records


def test_a_part_keeps_the_first_tasks_and_their_sampled_turns(tmp_path, tiny_model_dir):
    offline = _offline(tmp_path, tiny_model_dir)
    rows = list(read_jsonl(str(offline)))  # 3 tasks x (thorough: 4 turns, guesser: 1 turn)
    # the sampler covered the first 4 rows: every thorough dialogue and the first guesser
    write_jsonl(str(tmp_path / "sampled.jsonl"), _sampled(offline, 4))
    kept = subset(SubsetOptions(offline=str(offline), output_path=str(tmp_path / "part.jsonl"),
                                k=2, fraction="2/3", sampled=str(tmp_path / "sampled.jsonl"),
                                sampled_output=str(tmp_path / "part_sampled.jsonl")))
    assert kept == 2
    part = list(read_jsonl(str(tmp_path / "part.jsonl")))
    assert part == [rows[0], rows[1], rows[3], rows[4]]  # tasks 0 and 1, both rollouts
    records = list(read_jsonl(str(tmp_path / "part_sampled.jsonl")))
    # tasks 0 and 1's thorough turns (4 + 4) and task 0's guesser turn
    assert len(records) == 9
    truths = [rows[0]["task"]["ground_truth"], rows[1]["task"]["ground_truth"]]
    assert [r["ground_truth"] for r in records] == [truths[0]] * 4 + [truths[1]] * 4 + truths[:1]
    assert records[-1]["older_output"] == rows[3]["dialogue_history"][-1]["output"]
    assert subset(SubsetOptions(offline=str(offline), output_path=str(tmp_path / "tiny.jsonl"),
                                k=2, fraction="0.1")) == 1  # at least one task
    assert [tag(text) for text in ("1/3", "2/3", "0.5", "1")] == ["1of3", "2of3", "1of2", "1of1"]


def test_bad_input_is_refused(tmp_path, tiny_model_dir):
    offline = _offline(tmp_path, tiny_model_dir)
    for fraction in ("0", "3/2", "half"):
        with pytest.raises(ValueError, match="--fraction"):
            SubsetOptions(offline=str(offline), output_path=str(tmp_path / "p.jsonl"), k=2,
                          fraction=fraction)
    with pytest.raises(ValueError, match="not a whole number of --k 4"):
        subset(SubsetOptions(offline=str(offline), output_path=str(tmp_path / "p.jsonl"), k=4))
    records = _sampled(offline, 2)
    records[1]["older_output"] = "something else"
    write_jsonl(str(tmp_path / "sampled.jsonl"), records)
    with pytest.raises(ValueError, match="sampled.jsonl:2: field 'older_output'"):
        subset(SubsetOptions(offline=str(offline), output_path=str(tmp_path / "part.jsonl"),
                             k=2, fraction="1/3", sampled=str(tmp_path / "sampled.jsonl"),
                             sampled_output=str(tmp_path / "out.jsonl")))
    # refused before anything is written
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "part.jsonl").exists()
    with pytest.raises(ValueError, match="go together"):
        SubsetOptions(offline=str(offline), sampled=str(tmp_path / "sampled.jsonl"))
