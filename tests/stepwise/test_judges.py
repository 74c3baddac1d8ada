"""The step critics behind one interface (sweet_rl/stepwise/judges.py) and the rank stage's
``--critic_type``: LLM-as-a-Judge (pairwise, in process and over HTTP), random, heads."""

from __future__ import annotations

import json

import pytest

from sweet_rl.stages.rank import RankOptions, rank
from sweet_rl.stages.factory import build_judge
from sweet_rl.stages.groups import JudgeOptions
from sweet_rl.io import read_jsonl
from sweet_rl.records import StepSample
from sweet_rl.stepwise.judges import (HeadJudge, PairwiseJudge, RandomJudge, history_text,
                                      judge_messages, pairwise_scores, verdict)
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step, completion

GROUND_TRUTH = "def f(a, b): return a + b"


def _sample(candidates, messages=None) -> StepSample:
    return StepSample.from_dict({
        "input": "<prompt>", "input_with_ground_truth": f"In light: {GROUND_TRUTH}.<prompt>",
        "older_output": "o", "reward": 1.0, "ground_truth": GROUND_TRUTH,
        "messages": messages or [{"role": "system", "content": "be helpful"},
                                 {"role": "user", "content": "add two numbers"},
                                 {"role": "assistant", "content": "stored turn"}],
        "additional_outputs": list(candidates),
        "additional_reference_logprobs": [0.0] * len(candidates),
        "additional_reference_logprobs_sum": [0.0] * len(candidates)})


def test_verdicts_and_pairwise_shares_worked_by_hand():
    assert [verdict(t) for t in ("A", " b.", "Reply A", "**B**", "", None, "AB")] == \
        [0, 1, None, 1, None, None, 0]
    # n = 3, ordered pairs (0,1) (0,2) (1,0) (1,2) (2,0) (2,1); candidate 0 wins every
    # comparison: as A in (0,1), (0,2) and as B in (1,0), (2,0); 1 beats 2 both ways.
    # Each candidate is in 2(n-1) = 4 comparisons: 0 -> 4/4, 1 -> 2/4, 2 -> 0/4.
    assert pairwise_scores(3, [0, 0, 1, 0, 1, 1]) == [1.0, 0.5, 0.0]
    # an unreadable answer gives half a win to each side: 0 -> (1 + 0.5) / 2, 1 -> 0.5 / 2
    assert pairwise_scores(2, [0, None]) == [0.75, 0.25]
    with pytest.raises(ValueError, match="3 verdicts for 2 ordered pairs"):
        pairwise_scores(2, [0, 0, 0])


def test_the_judge_sees_the_reference_the_history_and_both_replies():
    messages = judge_messages(_sample(["x", "y"]), "ask about types", "answer now")
    text = messages[-1]["content"]
    assert GROUND_TRUTH in text and "user: add two numbers" in text
    assert "stored turn" not in text and "be helpful" not in text  # the turn itself, the system
    assert text.index("ask about types") < text.index("answer now")
    assert history_text(_sample(["x"])) == "user: add two numbers"


def test_a_pairwise_judge_orders_candidates_by_the_comparisons_it_wins():
    # a judge that prefers the reply mentioning the answer, then the shorter one
    def complete(batch):
        out = []
        for messages in batch:
            text = messages[-1]["content"]
            first = text.split("Reply A:\n")[1].split("\n\nReply B:")[0]
            second = text.split("Reply B:\n")[1].split("\n\n")[0]
            rank = [("ANSWER" in c, -len(c)) for c in (first, second)]
            out.append("A" if rank[0] > rank[1] else "B")
        return out

    scores = PairwiseJudge(complete).judge([_sample(["a long question?", "I WANT TO ANSWER: x",
                                                     "short?"])])[0]
    # each candidate is in 4 comparisons: the answer wins all 4, "short?" wins its 2 against
    # the long question, which wins none
    assert scores == [0.0, 1.0, 0.5]


def test_random_and_head_judges():
    sample = _sample(["a", "b", "c"])
    assert RandomJudge(1).judge([sample]) == RandomJudge(1).judge([sample])
    assert RandomJudge(1).judge([sample]) != RandomJudge(2).judge([sample])

    class LengthCritic:  # stands in for a trained head: the score is the text's length
        def score(self, texts, batch_size=8):
            return [float(len(t)) for t in texts]

    with_truth = HeadJudge(LengthCritic()).judge([_sample(["ab", "abcd"])])[0]
    without = HeadJudge(LengthCritic(), use_ground_truth=False).judge([_sample(["ab", "abcd"])])[0]
    context = len(f"In light: {GROUND_TRUTH}.<prompt>")
    assert with_truth == [context + 2, context + 4] and without == [len("<prompt>") + 2,
                                                                    len("<prompt>") + 4]


def _steps(tmp_path):
    path = tmp_path / "sampled.jsonl"
    path.write_text(json.dumps(_sample(["OUTPUT: ints?", "I WANT TO ANSWER: def f",
                                        "OUTPUT: hm"]).to_dict()) + "\n")
    return path


def test_rank_with_the_in_process_judge_and_with_random(tmp_path, tiny_model_dir):
    steps = _steps(tmp_path)
    for critic_type in ("judge", "random"):
        out = tmp_path / f"ranked_{critic_type}.jsonl"
        rank(RankOptions(input_path=str(steps), output_path=str(out),
                         model_id=tiny_model_dir if critic_type == "judge" else None,
                         critic_type=critic_type))
        [row] = read_jsonl(str(out))
        assert len(row["judge_result"]) == 3
        if critic_type == "judge":  # shares of 2(n-1) comparisons: they add up to n / 2
            assert sum(row["judge_result"]) == pytest.approx(1.5)
        sidecar = json.loads((tmp_path / f"ranked_{critic_type}.jsonl.config.json").read_text())
        assert sidecar["stages"]["rank_best_of_n"]["critic_type"] == critic_type
    with pytest.raises(ValueError, match="--critic_type must be one of"):
        rank(RankOptions(input_path=str(steps), output_path=str(tmp_path / "x.jsonl"),
                         model_id=tiny_model_dir, critic_type="oracle"))


def test_the_judge_over_an_openai_compatible_server(tmp_path):
    # a judge that always answers "A": each candidate wins exactly its turns as A
    with FakeOpenAIServer([Step(body=completion("A"))]) as server:
        judge = build_judge(JudgeOptions(critic_type="judge", model_id="served-judge",
                                         judge_base_url=server.base_url))
        scores = judge.judge([_sample(["ask", "answer"])])[0]
        bodies = server.requests
    assert scores == [0.5, 0.5] and len(bodies) == 2
    assert {b["model"] for b in bodies} == {"served-judge"} and bodies[0]["temperature"] == 0.0
    assert all(GROUND_TRUTH in b["messages"][-1]["content"] for b in bodies)


def _hand_set_critic(tiny_model_dir, folder, kind):
    """A scalar critic saved as train_dpo.py --critic_head saves one: its head reads hidden
    unit 3 (score = 0.25 + the mean over the text's tokens of that unit)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    from sweet_rl.training.heads import ScalarHeadModel, load_backbone, save_head_files

    model = ScalarHeadModel(load_backbone(tiny_model_dir), seed=0).eval()
    with torch.no_grad():
        model.score_head.weight.zero_()
        model.score_head.weight[0, 3] = 1.0
        model.score_head.bias.fill_(0.25)
    folder.mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(folder / "model.safetensors"))
    save_head_files(model, str(folder), kind)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(str(folder))
    return str(folder)


def test_rank_with_a_regression_head_writes_its_scores(tmp_path, tiny_model_dir):
    from sweet_rl.training.heads import load_scalar_critic

    critic = _hand_set_critic(tiny_model_dir, tmp_path / "critic", "regression")
    steps, out = _steps(tmp_path), tmp_path / "ranked.jsonl"
    rank(RankOptions(input_path=str(steps), output_path=str(out), model_id=critic,
                     critic_type="regression"))
    [row] = read_jsonl(str(out))
    sample = StepSample.from_dict(json.loads(steps.read_text()))
    direct = load_scalar_critic(critic).score(
        [sample.input_with_ground_truth + c for c in sample.additional_outputs])
    assert row["judge_result"] == pytest.approx(direct, abs=1e-5)
    # the order the head gives the three candidates, worked out from the direct scores
    order = sorted(range(3), key=lambda k: -direct[k])
    assert sorted(range(3), key=lambda k: -row["judge_result"][k]) == order
    assert len(set(round(v, 6) for v in direct)) == 3  # no ties: the order is meaningful
    with pytest.raises(ValueError, match="holds a regression head, not value"):
        rank(RankOptions(input_path=str(steps), output_path=str(tmp_path / "v.jsonl"),
                         model_id=critic, critic_type="value"))
