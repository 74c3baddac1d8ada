"""The miniature reproduction's table: tests passed and success per method over seeds, from
graded evaluation files; a file that is not graded is named with its line and field."""

import json

import pytest

from sweet_rl.recipes.mini.table import TableOptions, collect, render, table


def _write(path, rewards):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"reward": r}) + "\n" for r in rewards))


def test_means_and_spreads_over_seeds(tmp_path):
    _write(tmp_path / "seed0" / "eval_zero_shot.jsonl", [1.0, 0.5, 0.0, 0.0])
    _write(tmp_path / "seed1" / "eval_zero_shot.jsonl", [1.0, 1.0, 0.0, 0.0])
    _write(tmp_path / "seed0" / "eval_sweet.jsonl", [1.0, 1.0, 1.0, 0.2])
    found = collect(str(tmp_path))
    assert found["zero_shot"][0] == {"tests_passed": 37.5, "success": 25.0, "dialogues": 4}
    assert found["zero_shot"][1]["success"] == 50.0
    (tmp_path / "seed0" / "best_of_n.json").write_text(json.dumps(
        {"ns": [1, 2], "success": {"random": {"1": 25.0, "2": 25.0},
                                   "sweet critic": {"1": 25.0, "2": 50.0}}}))
    text = table(TableOptions(output_dir=str(tmp_path), seconds=90))
    assert text.endswith("| N | random | sweet critic |\n| --- | --- | --- |\n"
                         "| 1 | 25.0 | 25.0 |\n| 2 | 25.0 | 50.0 |")
    lines = text.splitlines()
    # the paper's order: zero-shot first, SWEET-RL last; success 37.5 +- stdev(25, 50)
    assert lines[2] == "| Zero-shot (warm agent) | 43.8 ± 8.8 | 37.5 ± 17.7 | 2 |"
    assert lines[3] == "| SWEET-RL | 80.0 ± 0.0 | 75.0 ± 0.0 | 1 |"
    assert "whole run: 1.5 min" in text
    assert (tmp_path / "table.md").read_text().strip() == text
    assert json.loads((tmp_path / "table.json").read_text())["seconds"] == 90
    assert render(found).count("\n") == 3


def test_an_ungraded_file_is_named_with_its_line(tmp_path):
    _write(tmp_path / "seed0" / "eval_rft.jsonl", [1.0])
    with open(tmp_path / "seed0" / "eval_rft.jsonl", "a") as handle:
        handle.write(json.dumps({"task": {}}) + "\n")
    with pytest.raises(ValueError, match=r"eval_rft.jsonl:2: field 'reward'"):
        collect(str(tmp_path))
    with pytest.raises(ValueError, match="no seed"):
        table(TableOptions(output_dir=str(tmp_path / "empty")))


def test_the_data_scaling_sweep_has_its_own_table(tmp_path):
    for seed, shift in ((0, 0.0), (1, 0.25)):
        _write(tmp_path / f"seed{seed}" / "eval_sweet.jsonl", [1.0, 1.0, 1.0, shift])
        _write(tmp_path / f"seed{seed}" / "eval_sweet_1of3.jsonl", [1.0, 0.0, 0.0, 0.0])
        _write(tmp_path / f"seed{seed}" / "eval_multiturn_dpo_2of3.jsonl", [1.0, 1.0, 0.0, 0.0])
    _write(tmp_path / "seed0" / "eval_multiturn_dpo.jsonl", [1.0, 1.0, 1.0, 1.0])
    lines = table(TableOptions(output_dir=str(tmp_path))).splitlines()
    # the parts stay out of the main table
    assert [line.split(" | ")[0] for line in lines[2:5]] == ["| Multi-turn DPO", "| SWEET-RL", ""]
    at = lines.index("Success % by the share of the offline tasks trained on (mean ± spread "
                     "over seeds)")
    assert lines[at + 1:] == [
        "| offline tasks | Multi-turn DPO | SWEET-RL |", "| --- | --- | --- |",
        "| 1/3 | — | 25.0 ± 0.0 |", "| 2/3 | 50.0 ± 0.0 | — |",
        "| all | 100.0 ± 0.0 | 75.0 ± 0.0 |"]
