"""The sample stage on vLLM's engine (the tiny Llama with heads of 32 and a loud <|eot_id|>, so
candidates both stop and run to the limit):

* each candidate's reference log-probs (mean and sum) are the hf backend's scorer's on the
  tokens vLLM sampled, stop token included, within :data:`LOGPROB_TOLERANCE`;
* every candidate is drawn from its own seed, ``candidate_seeds(row_seed(--seed, index))``,
  so it depends only on ``--seed`` and its record's global index: not on the records beside
  it in a batch, nor on the shard;
* ``scripts/sample_best_of_n.py --backend vllm`` (its own process, vLLM's spawned engine)
  writes, for shard 1 of 2, the candidates the in-process engine draws for those records.
"""

import json

import pytest

from sweet_rl.seeding import row_seed
from tests.model_helpers import write_offline
from tests.vllm.conftest import run_script

pytestmark = [pytest.mark.vllm, pytest.mark.slow]  # vLLM's engine, for real

N, NEW_TOKENS, SEED = 8, 12, 5
# |vLLM - hf| of a candidate's summed log-prob (float32, 2 to 12 tokens of a random model):
# measured at most 2.9e-6 (mean 7.6e-7) over the 64 candidates below, 7 of which stopped.
LOGPROB_TOLERANCE = 1e-4
TASKS = (("add two numbers", 1.0), ("sort a list", 0.0), ("reverse a string", 1.0),
         ("count the vowels", 0.0))  # 4 trajectories x 2 turns: 8 step records


@pytest.fixture(scope="module")
def offline(tmp_path_factory, stop_model):
    from sweet_rl.models.hf_generation import load_tokenizer

    path = tmp_path_factory.mktemp("offline") / "offline.jsonl"
    return write_offline(path, load_tokenizer(stop_model), TASKS)


CANDIDATE_KEYS = {"additional_outputs", "additional_reference_logprobs",
                  "additional_reference_logprobs_sum", "judge_result"}


@pytest.fixture(scope="module")
def records(offline):
    from sweet_rl.stepwise.turns import read_turn_records

    rows, _ = read_turn_records(offline)
    assert len(rows) == 8
    return rows


@pytest.fixture(scope="module")
def sampler(stop_llm, stop_model):
    from sweet_rl.stepwise.vllm_backend import VLLMSampler

    return VLLMSampler(stop_model, temperature=1.0, max_new_tokens=NEW_TOKENS, seed=SEED,
                       llm=stop_llm)


def test_reference_logprobs_are_the_hf_scorers_on_the_sampled_tokens(stop_llm, stop_model,
                                                                       records, sampler):
    from sweet_rl.models import vllm_engine
    from sweet_rl.stepwise.scoring import ContinuationScorer
    from sweet_rl.stepwise.vllm_backend import candidate_requests, completion_score

    prompts = [r.input for r in records]
    seeds = [row_seed(SEED, i) for i in range(len(records))]
    sampled = sampler.sample(prompts, N, seeds)
    # the sampler's own requests again, to see the tokens behind its texts and scores
    requests = candidate_requests(prompts, N, seeds, 1.0, NEW_TOKENS, sampler.stop_ids)
    results = vllm_engine.generate(stop_llm, [p for p, _ in requests],
                                   [vllm_engine.sampling_params(**kw) for _, kw in requests])
    hf = ContinuationScorer(stop_model, device="cpu")
    eot = hf.tokenizer.eos_token_id
    stopped = cut = 0
    drawn = set()
    for k, (texts, scores) in enumerate(sampled):
        outputs = [r.outputs[0] for r in results[k * N:(k + 1) * N]]
        # seeded: the same draws again; the texts are the tokenizer's decoding of them
        assert texts == [vllm_engine.completion_text(sampler.tokenizer, o) for o in outputs]
        rows = [list(r.prompt_token_ids) + list(o.token_ids)
                for r, o in zip(results[k * N:(k + 1) * N], outputs)]
        starts = [len(r.prompt_token_ids) for r in results[k * N:(k + 1) * N]]
        for o, score, reference in zip(outputs, scores, hf.score_spans(rows, starts)):
            assert score == completion_score(o, sampler.stop_ids)
            assert score[1] == reference[1] == len(o.token_ids)  # the stop token counted
            assert score[0] == pytest.approx(reference[0], abs=LOGPROB_TOLERANCE)
            stopped += o.token_ids[-1] == eot
            cut += len(o.token_ids) == NEW_TOKENS and o.token_ids[-1] != eot
        drawn.update(texts)
    assert len(drawn) > N  # seeded draws, not one draw repeated
    assert stopped and cut  # both kinds of candidate were compared


def test_a_candidate_depends_on_the_seed_and_its_records_index_only(records, sampler):
    prompts = [r.input for r in records]
    seeds = [row_seed(SEED, i) for i in range(len(records))]
    whole = sampler.sample(prompts[:6], N, seeds[:6])
    tail = sampler.sample(prompts[3:6], N, seeds[3:6])  # another batch: the same draws
    for (texts, scores), (again, again_scores) in zip(whole[3:], tail):
        assert again == texts
        assert [s for s, _ in again_scores] == pytest.approx([s for s, _ in scores], abs=1e-5)
    # record 1's seed is record 0's plus one: its candidates share no draw with record 0's
    # (one request with n=8 and the record's seed would have: vLLM seeds its samples s, s+1..)
    same_prompt = sampler.sample([prompts[0], prompts[0]], N, seeds[:2])
    assert not set(same_prompt[0][0]) & set(same_prompt[1][0])


def test_the_stage_script_on_vllm_writes_the_engines_candidates(tmp_path, offline, stop_model,
                                                                 records, sampler):
    out = tmp_path / "sampled.jsonl"
    result = run_script(["scripts/sample_best_of_n.py", offline, str(out),
                         "--agent_model", stop_model, "--backend", "vllm",
                         "--best_of_n", str(N), "--max_new_tokens", str(NEW_TOKENS),
                         "--seed", str(SEED), "--chunk_size", "2",
                         "--num_shards", "2", "--shard_index", "1"])
    assert "sample_best_of_n: 4 turns, 32 candidates" in result.stdout
    with open(str(out) + ".config.json", encoding="utf-8") as handle:
        facts = json.load(handle)["stages"]["sample_best_of_n"]
    first, last, total = facts["shard_rows"]
    assert (first, last, total) == (4, 8, 8) and facts["backend"] == "vllm"
    with open(out, encoding="utf-8") as handle:
        written = [json.loads(line) for line in handle]
    # the same records, layout unchanged, with what the in-process engine draws for them
    expected = sampler.sample([r.input for r in records[first:last]], N,
                              [row_seed(SEED, i) for i in range(first, last)])
    for row, record, (texts, scores) in zip(written, records[first:last], expected):
        # the record's own fields as the file holds them (its candidate lists are empty)
        fields = {k: v for k, v in record.to_dict().items() if k not in CANDIDATE_KEYS}
        assert {k: row[k] for k in fields} == fields
        assert row["additional_outputs"] == texts
        assert row["additional_reference_logprobs_sum"] == pytest.approx(
            [s for s, _ in scores], abs=LOGPROB_TOLERANCE)
        assert row["additional_reference_logprobs"] == pytest.approx(
            [s / c for s, c in scores], abs=LOGPROB_TOLERANCE)
