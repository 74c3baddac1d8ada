"""The outline evaluate_code and evaluate_html share, driven by a fake scorer."""

import json

import pytest

from sweet_rl.cli.evaluate_common import evaluate, load_trajectories
from sweet_rl.evaluation.preferences import GROUND_TRUTH_PREFIX, success_pairs
from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.records import RecordError, Trajectory


def _row(description, answer, reward=None):
    return {"task": {"problem_description": description, "ground_truth": "truth " + description},
            "dialogue_history": [{"role": "user", "content": description},
                                 {"role": "assistant", "content": answer, "input": "IN:",
                                  "output": answer}],
            "answer": answer, "reward": reward}


def _file(tmp_path, rows):
    path = tmp_path / "t.jsonl"
    write_jsonl(str(path), rows)
    return str(path)


def test_scores_only_todo_writes_everything_and_prints_the_report(tmp_path, capsys):
    # 2 tasks x 2 rollouts: rows a0 b0 a1 b1; b0 already has a reward
    path = _file(tmp_path, [_row("a", "x"), _row("b", "y", 0.5), _row("a", "z"), _row("b", "w")])
    trajectories = load_trajectories(path, 2)
    scored = []

    def score(rows):
        scored.extend(rows)
        for i, value in zip(rows, (1.0, 0.25, 0.5)):
            trajectories[i].reward = value
            trajectories[i].extra["how"] = "fake"

    def report(outcome):
        assert (outcome.k, outcome.num_tasks, outcome.scored) == (2, 2, 3)
        assert outcome.rewards == [1.0, 0.5, 0.25, 0.5]
        assert outcome.best == [1.0, 0.5]
        assert outcome.pairs == [(0, 2)] and outcome.pairs_written
        return {"best": outcome.best}, ["line one", "line two"]

    pairs = tmp_path / "pairs.jsonl"
    truth = tmp_path / "truth.jsonl"
    metrics = evaluate("fake_stage", path, trajectories, 2, [0, 2, 3], score, success_pairs,
                       {"k": 2}, str(pairs), str(truth), "nothing to score", report)
    assert scored == [0, 2, 3]
    assert metrics == {"best": [1.0, 0.5]}
    assert capsys.readouterr().out == "line one\nline two\n"
    saved = read_jsonl(path, Trajectory.from_dict)
    assert [t.reward for t in saved] == [1.0, 0.5, 0.25, 0.5]
    assert [t.extra.get("how") for t in saved] == ["fake", None, "fake", "fake"]
    assert read_jsonl(str(pairs)) == [{"chosen": "IN:x", "rejected": "IN:z"}]
    prefix = GROUND_TRUTH_PREFIX.format(ground_truth="truth a")
    assert read_jsonl(str(truth)) == [{"chosen": prefix + "IN:x", "rejected": prefix + "IN:z"}]
    for written in (path, str(pairs), str(truth)):
        with open(written + ".config.json", encoding="utf-8") as handle:
            assert json.load(handle)["stages"]["fake_stage"] == {"k": 2}


def test_nothing_to_score_leaves_the_file_and_writes_no_pairs(tmp_path, capsys):
    path = _file(tmp_path, [_row("a", "x", 1.0), _row("a", "z", 0.0)])
    before = open(path, "rb").read()
    trajectories = load_trajectories(path, 2)

    def score(rows):
        raise AssertionError("nothing should be scored")

    def report(outcome):
        assert (outcome.scored, outcome.pairs, outcome.pairs_written) == (0, [(0, 1)], False)
        return {}, ["only line"]

    arguments = {"seen": True}
    assert evaluate("fake_stage", path, trajectories, 2, [], score, success_pairs, arguments,
                    None, None, "nothing to score", report) == {}
    assert open(path, "rb").read() == before
    assert capsys.readouterr().out == "only line\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl", "t.jsonl.config.json"]


def test_arguments_added_while_scoring_reach_the_sidecar(tmp_path):
    path = _file(tmp_path, [_row("a", "x")])
    trajectories = load_trajectories(path, 1)
    arguments = {"k": 1}

    def score(rows):
        trajectories[0].reward = 0.0
        arguments["browser_version"] = "chromium 1"

    evaluate("fake_stage", path, trajectories, 1, [0], score, success_pairs, arguments, None,
             None, "", lambda outcome: ({}, []))
    with open(path + ".config.json", encoding="utf-8") as handle:
        assert json.load(handle)["stages"]["fake_stage"] == {
            "k": 1,
            "browser_version": "chromium 1",
        }


def test_load_refuses_empty_files_then_bad_rows_then_bad_layout(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(RecordError, match="no trajectories"):
        load_trajectories(str(empty), 1, lambda path, rows: pytest.fail("not called on no rows"))
    path = _file(tmp_path, [_row("a", "x"), _row("a", "y"), _row("b", "z")])

    def refuse(path, rows):
        raise RecordError("the command's own check", path=path, line=2)

    with pytest.raises(RecordError, match="line 2: the command's own check"):
        load_trajectories(path, 2, refuse)  # the row check comes before the layout check
    with pytest.raises(RecordError, match="not a multiple of --k 2"):
        load_trajectories(path, 2)
    assert len(load_trajectories(path, 1)) == 3
