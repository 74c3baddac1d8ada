"""The outline evaluate_code and evaluate_html share (sweet_rl.stages.evaluation), driven by a
fake evaluation that scores rows from a table."""

import json

import pytest

from sweet_rl.evaluation.preferences import GROUND_TRUTH_PREFIX, success_pairs
from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.records import RecordError, Trajectory
from sweet_rl.stages.evaluation import Evaluation, load_trajectories, run_evaluation
from sweet_rl.stages.groups import EvaluateOptions


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


class Table(Evaluation):
    """Scores rows from ``scores`` (by row), success pairs, one line of its own."""

    stage = "fake_stage"

    def __init__(self, opts, scores, report=None):
        super().__init__(opts)
        self.scores, self.scored, self._report = scores, [], report

    def score(self, trajectories, rows):
        self.scored.extend(rows)
        for i in rows:
            trajectories[i].reward = self.scores[i]
            trajectories[i].extra["how"] = "fake"
        self.arguments["learnt"] = "while scoring"

    def pairs(self, rewards, k):
        return success_pairs(rewards, k)

    def report(self, outcome):
        if self._report:
            self._report(outcome)
        return {"best": outcome.best}, ["line one", "line two"]


def test_scores_only_rows_without_a_reward_and_writes_everything(tmp_path, capsys):
    # 2 tasks x 2 rollouts: rows a0 b0 a1 b1; b0 already has a reward
    path = _file(tmp_path, [_row("a", "x"), _row("b", "y", 0.5), _row("a", "z"), _row("b", "w")])
    pairs, truth = tmp_path / "pairs.jsonl", tmp_path / "truth.jsonl"
    opts = EvaluateOptions(saved_path=path, k=2, preference_path=str(pairs),
                           ground_truth_preference_path=str(truth))

    def report(outcome):
        assert (outcome.k, outcome.num_tasks, outcome.scored) == (2, 2, 3)
        assert outcome.rewards == [1.0, 0.5, 0.25, 0.5]
        assert outcome.best == [1.0, 0.5]
        assert outcome.pairs == [(0, 2)] and outcome.pairs_written

    evaluation = Table(opts, {0: 1.0, 2: 0.25, 3: 0.5}, report)
    metrics, trajectories = run_evaluation(evaluation)
    assert evaluation.scored == [0, 2, 3] and metrics == {"best": [1.0, 0.5]}
    assert capsys.readouterr().out == "line one\nline two\n"
    saved = read_jsonl(path, Trajectory.from_dict)
    assert [t.reward for t in saved] == [1.0, 0.5, 0.25, 0.5] == [t.reward for t in trajectories]
    assert [t.extra.get("how") for t in saved] == ["fake", None, "fake", "fake"]
    assert read_jsonl(str(pairs)) == [{"chosen": "IN:x", "rejected": "IN:z"}]
    prefix = GROUND_TRUTH_PREFIX.format(ground_truth="truth a")
    assert read_jsonl(str(truth)) == [{"chosen": prefix + "IN:x", "rejected": prefix + "IN:z"}]
    for written in (path, str(pairs), str(truth)):  # the options, and what scoring learnt
        with open(written + ".config.json", encoding="utf-8") as handle:
            assert json.load(handle)["stages"]["fake_stage"] == dict(opts.flags(),
                                                                     learnt="while scoring")


def test_nothing_to_score_leaves_the_file_and_writes_no_pairs(tmp_path, capsys):
    path = _file(tmp_path, [_row("a", "x", 1.0), _row("a", "z", 0.0)])
    before = open(path, "rb").read()

    def report(outcome):
        assert (outcome.scored, outcome.pairs, outcome.pairs_written) == (0, [(0, 1)], False)

    metrics, _ = run_evaluation(Table(EvaluateOptions(saved_path=path, k=2), {}, report))
    assert metrics == {"best": [1.0]}
    assert open(path, "rb").read() == before
    assert capsys.readouterr().out == "line one\nline two\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl", "t.jsonl.config.json"]
    # --reevaluate scores every row again
    evaluation = Table(EvaluateOptions(saved_path=path, k=2, reevaluate=True), {0: 0.0, 1: 1.0})
    run_evaluation(evaluation)
    assert evaluation.scored == [0, 1]


def test_rows_with_simulator_errors_are_named_or_skipped(tmp_path, capsys):
    cut = dict(_row("b", "y"), simulator_errors=["simulator: HTTP 400"])
    path = _file(tmp_path, [_row("a", "x"), cut])
    run_evaluation(Table(EvaluateOptions(saved_path=path), {0: 1.0, 1: 0.0}))
    assert "fake_stage: warning: 1 of 2 rows carry a simulator error" in capsys.readouterr().out
    skipping = Table(EvaluateOptions(saved_path=path, reevaluate=True), {0: 1.0, 1: 0.0})
    skipping.skip_errors = True
    metrics, _ = run_evaluation(skipping)
    out = capsys.readouterr().out
    assert metrics == {"best": [1.0], "skipped_errors": 1}
    assert out.startswith("line one, skipped 1 rows with simulator errors\n")


def test_load_refuses_empty_files_then_bad_rows_then_bad_layout(tmp_path):
    class Refusing(Table):
        def check_rows(self, path, trajectories):
            raise RecordError("the command's own check", path=path, line=2)

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(RecordError, match="no trajectories"):
        load_trajectories(str(empty), 1, Refusing(EvaluateOptions(saved_path=str(empty)), {}))
    path = _file(tmp_path, [_row("a", "x"), _row("a", "y"), _row("b", "z")])
    with pytest.raises(RecordError, match="line 2: the command's own check"):
        load_trajectories(path, 2, Refusing(EvaluateOptions(saved_path=path), {}))
    with pytest.raises(RecordError, match="not a multiple of --k 2"):
        load_trajectories(path, 2, Table(EvaluateOptions(saved_path=path), {}))
    assert len(load_trajectories(path, 1, Table(EvaluateOptions(saved_path=path), {}))) == 3
