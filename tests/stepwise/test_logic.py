"""Pure logic of the step stages: turn records, pair selection, judge arithmetic, vLLM adapters."""

import dataclasses
import json
import random
from types import SimpleNamespace

import pytest

from sweet_rl.records import RecordError, StepSample, Trajectory
from sweet_rl.stepwise import pairs, ranking, turns, vllm_backend
from sweet_rl.stepwise.sampling import with_candidates
from sweet_rl.stepwise.scoring import mean_of


def _trajectory(reward=1.0):
    return Trajectory.from_dict({
        "task": {"problem_description": "add", "ground_truth": "def f(a, b): return a + b"},
        "dialogue_history": [
            {"role": "user", "content": "add"},
            {"role": "assistant", "content": "ints?", "input": "P1", "output": "OUTPUT: ints?"},
            {"role": "user", "content": "yes"},
            {"role": "assistant", "content": "I WANT TO ANSWER: x", "input": "P2", "output": "O2"}],
        "answer": "x", "reward": reward})


def test_turn_records_one_per_assistant_turn():
    # messages: the dialogue up to AND including the turn, entries as stored (the original's
    # d["dialogue_history"][: i + 1])
    first, second = turns.turn_records(_trajectory(0.5))
    assert first == StepSample(
        input="P1",
        input_with_ground_truth="In light that the final answer is: def f(a, b): return a + b.P1",
        older_output="OUTPUT: ints?",
        reward=0.5,
        ground_truth="def f(a, b): return a + b",
        messages=[
            {"role": "user", "content": "add"},
            {"role": "assistant", "content": "ints?", "input": "P1", "output": "OUTPUT: ints?"},
        ],
    )
    assert first.additional_outputs == [] and first.judge_result is None  # no candidates yet
    assert second.older_output == "O2" and len(second.messages) == 4
    assert second.messages[2] == {"role": "user", "content": "yes"}
    assert second.messages[3] == {"role": "assistant", "content": "I WANT TO ANSWER: x",
                                  "input": "P2", "output": "O2"}


def test_turn_records_need_reward_and_turn_fields():
    with pytest.raises(RecordError, match="reward"):
        turns.turn_records(_trajectory(None))
    bad = _trajectory()
    bad.dialogue_history[3].input = None
    with pytest.raises(RecordError) as err:
        turns.turn_records(bad)
    assert err.value.field == "dialogue_history[3].input"


@pytest.mark.parametrize("total, fraction, expected", [(100, 0.1, 10), (15, 0.1, 1), (3, 1.0, 3),
                                                       (0, 0.5, 0), (7, 0.5, 3)])
def test_fraction_count(total, fraction, expected):
    assert turns.fraction_count(total, fraction) == expected


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5])
def test_fraction_out_of_range(fraction):
    with pytest.raises(ValueError):
        turns.fraction_count(10, fraction)


def test_split_halves_even_odd_and_ties():
    # ascending, stable: judge 0.1, 0.9, -1, 0.5 -> order 2, 0, 3, 1; low = first N // 2
    assert pairs.split_halves([0.1, 0.9, -1.0, 0.5]) == ([2, 0], [3, 1])
    # odd N: low = first 5 // 2 = 2 positions, the middle candidate (judge 2) goes high
    assert pairs.split_halves([3, 2, 1, 0, 4]) == ([3, 2], [1, 0, 4])
    assert pairs.split_halves([1.0, 1.0, 1.0, 1.0]) == ([0, 1], [2, 3])  # ties keep order
    assert pairs.split_halves([1.0]) == ([], [0])


def test_draw_pairs_high_vs_low_and_seeded():
    judge = [0.0, 5.0, -3.0, 4.0, 1.0, -1.0]  # high half {1, 3, 4}, low half {0, 2, 5}
    drawn = pairs.draw_pairs(judge, 200, random.Random(0))
    assert len(drawn) == 200
    assert {c for c, _ in drawn} == {1, 3, 4} and {r for _, r in drawn} == {0, 2, 5}
    assert drawn == pairs.draw_pairs(judge, 200, random.Random(0))
    rng = random.Random(0)
    assert pairs.draw_pairs([2.0], 4, rng) == []
    assert rng.random() == random.Random(0).random()  # a one-candidate turn draws nothing


def _ranked(prompt, outputs, judge):
    return StepSample(input=prompt, input_with_ground_truth=prompt, older_output="", reward=1.0,
                      ground_truth="", messages=[], additional_outputs=outputs,
                      judge_result=judge)


def test_pair_records_layouts_and_identical_drop():
    sample = _ranked("PROMPT|", ["good", "bad", "good", "bad"], [2.0, -1.0, 1.0, -2.0])
    records, dropped = pairs.pair_records([sample], 8, random.Random(1), "<E>", no_prompt=False)
    assert dropped == 0 and len(records) == 8
    # the original's key order: chosen, rejected, prompt
    expected = [("chosen", "good<E>"), ("rejected", "bad<E>"), ("prompt", "PROMPT|")]
    assert all(list(r.items()) == expected for r in records)
    records, _ = pairs.pair_records([sample], 2, random.Random(1), "<E>", no_prompt=True)
    assert records[0] == {"chosen": "PROMPT|good<E>", "rejected": "PROMPT|bad<E>"}
    same = dataclasses.replace(sample, additional_outputs=["x", "x", "x", "x"])
    records, dropped = pairs.pair_records([same], 3, random.Random(1), "<E>", no_prompt=True)
    assert records == [] and dropped == 3


def test_sft_record_takes_first_best():
    sample = _ranked("P", ["a", "b", "c"], [0.5, 2.0, 2.0])
    assert pairs.sft_record(sample, "<E>") == {
        "prompt": "P",
        "completion": "b<E>",
        "judge_result": 2.0,
    }


def _step(n=3):
    record = turns.turn_records(_trajectory())[0]
    # sums -6, -2, 0 over 3, 1, 0 tokens -> means -2, -2, 0 (no token: 0)
    return with_candidates(record, ["a b c", "d", ""][:n], [(-6.0, 3), (-2.0, 1), (0.0, 0)][:n])


def test_with_candidates_means_and_sums():
    step = _step()
    assert step.additional_reference_logprobs == [-2.0, -2.0, 0.0]
    assert step.additional_reference_logprobs_sum == [-6.0, -2.0, 0.0]
    assert mean_of((-3.0, 0)) == 0.0


def test_judge_result_arithmetic_mean_and_sum():
    step = _step()
    critic = [(-3.0, 3), (-0.5, 1), (0.0, 0)]  # means -1, -0.5, 0
    assert ranking.judge_results(critic, step) == [1.0, 1.5, 0.0]
    assert ranking.judge_results(critic, step, use_sum=True) == [3.0, 1.5, 0.0]
    two = _step(2)  # N is read from the record
    assert ranking.judge_results(critic[:2], two) == [1.0, 1.5]
    with pytest.raises(ValueError):
        ranking.judge_results(critic, two)
    assert ranking.critic_context(step).startswith("In light that the final answer is:")
    assert ranking.critic_context(step, use_ground_truth=False) == "P1"
    out = ranking.ranked(step, [1.0, 1.5, 0.0])
    assert out.judge_result == [1.0, 1.5, 0.0] and out.input == "P1"
    assert step.judge_result is None  # the input record is left as it was


def test_step_records_keep_the_original_key_order_through_sample_and_rank():
    """Made per turn, given candidates, then judged: the lines are the original's, key for key
    and in its order, with keys it does not know kept and judge_result appended last."""
    step = _step()
    assert list(step.to_dict()) == [
        "input", "input_with_ground_truth", "older_output", "reward", "ground_truth", "messages",
        "additional_outputs", "additional_reference_logprobs",
        "additional_reference_logprobs_sum"]
    read_back = StepSample.from_dict(json.loads(json.dumps(
        dict(step.to_dict(), note="kept"))))
    ranked = ranking.ranked(read_back, [1.0, 1.5, 0.0]).to_dict()
    assert list(ranked)[-3:] == ["additional_reference_logprobs_sum", "note", "judge_result"]
    assert ranked["note"] == "kept" and ranked["judge_result"] == [1.0, 1.5, 0.0]


def _lp(value):
    return SimpleNamespace(logprob=value, rank=1, decoded_token="t")


def test_vllm_completion_score_stop_token():
    # token 9 is the stop token vLLM keeps in token_ids and logprobs; text is decoded without
    # it. The original summed every logprobs entry: -1 - 2 - 1.5 over 3 tokens.
    done = SimpleNamespace(text="ab", token_ids=[5, 6, 9], cumulative_logprob=-4.5,
                           logprobs=[{5: _lp(-1.0), 77: _lp(-0.1)}, {6: _lp(-2.0)}, {9: _lp(-1.5)}])
    assert vllm_backend.completion_score(done, [9]) == (-4.5, 3)
    assert vllm_backend.completion_score(done, [9], include_stop=False) == (-3.0, 2)
    cut = SimpleNamespace(text="ab", token_ids=[5, 6], cumulative_logprob=-3.0,
                          logprobs=[{5: _lp(-1.0)}, {6: _lp(-2.0)}])  # hit max_tokens
    assert vllm_backend.completion_score(cut, [9]) == (-3.0, 2)
    assert vllm_backend.completion_score(cut, [9], include_stop=False) == (-3.0, 2)
    no_lp = SimpleNamespace(text="ab", token_ids=[5, 6, 9], cumulative_logprob=-4.5, logprobs=None)
    assert vllm_backend.completion_score(no_lp, [9]) == (-4.5, 3)
    with pytest.raises(ValueError, match="logprobs=0"):  # V1 leaves cumulative_logprob empty
        vllm_backend.completion_score(SimpleNamespace(text="ab", token_ids=[5], logprobs=None,
                                                      cumulative_logprob=None), [9])
    requests = [SimpleNamespace(outputs=[done]), SimpleNamespace(outputs=[cut])]  # one each
    assert vllm_backend.request_candidates(requests, [9]) == (["ab", "ab"], [(-4.5, 3), (-3.0, 2)])
    assert vllm_backend.request_candidates(requests, [9], include_stop=False) == (
        ["ab", "ab"], [(-3.0, 2), (-3.0, 2)])


def test_vllm_prompt_tail_score():
    ids = [1, 2, 3, 4, 5]
    plp = [None, {2: _lp(-0.5)}, {3: _lp(-1.0), 8: _lp(-0.2)}, {4: _lp(-2.0)}, {5: -3.0}]
    assert vllm_backend.prompt_tail_score(plp, ids, 3) == (-5.0, 2)  # tokens 4 and 5
    assert vllm_backend.prompt_tail_score(plp, ids, 5) == (0, 0)
    with pytest.raises(ValueError):
        vllm_backend.prompt_tail_score(plp[:4], ids, 3)


def test_vllm_sampling_kwargs():
    kwargs = vllm_backend.sampling_kwargs(1.0, 1024, 7, [128009])
    assert kwargs == dict(n=1, temperature=1.0, top_p=1.0, max_tokens=1024, seed=7, logprobs=0,
                          stop_token_ids=[128009], skip_special_tokens=True)


def test_vllm_candidates_are_seeded_as_the_hf_backends():
    # one n=1 request per candidate, seeded candidate_seeds(record seed): never the seed + j
    # that vLLM's V1 engine gives the samples of one n=N request (seed + 1 is the next record's)
    from sweet_rl.seeding import candidate_seeds, row_seed

    seeds = [row_seed(0, 5), row_seed(0, 6)]
    assert seeds[1] == seeds[0] + 1  # consecutive records, consecutive seeds
    requests = vllm_backend.candidate_requests(["p5", "p6"], 3, seeds, 1.0, 16, [9])
    assert [p for p, _ in requests] == ["p5"] * 3 + ["p6"] * 3
    drawn = [kw["seed"] for _, kw in requests]
    assert drawn == candidate_seeds(seeds[0], 3) + candidate_seeds(seeds[1], 3)
    assert len(set(drawn)) == 6 and all(kw["n"] == 1 for _, kw in requests)
