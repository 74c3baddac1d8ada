"""The rank stage on vLLM's engine: ``rank_best_of_n`` with ``--backend vllm`` (the stage's
main, its engine in-process) gives, for each ``--score_tokens``, the ``hf`` backend's
``judge_result`` on the same weights within :data:`JUDGE_TOLERANCE`, in the same order."""

import json

import pytest

from sweet_rl.stages.rank import RankOptions, rank
from sweet_rl.stages.sample import SampleOptions, sample
from tests.model_helpers import write_offline

pytestmark = [pytest.mark.vllm, pytest.mark.slow]  # vLLM's engine, for real

N = 4
# |vLLM - hf| of a judge_result (float32 per-token means): measured at most 3.0e-7 over the
# 3 x 32 candidates below (8 records of 4, each mode).
JUDGE_TOLERANCE = 1e-4
TASKS = (("add two numbers", 1.0), ("sort a list", 0.0), ("reverse a string", 1.0),
         ("count the vowels", 0.0))


@pytest.fixture(scope="module")
def sampled(tmp_path_factory, vllm_model):
    """8 step records with 4 candidates each (sampled by the hf backend: ranking is tested)."""
    from sweet_rl.models.hf_generation import load_tokenizer

    folder = tmp_path_factory.mktemp("rank")
    offline = write_offline(folder / "offline.jsonl", load_tokenizer(vllm_model), TASKS)
    out = str(folder / "sampled.jsonl")
    sample(SampleOptions(input_path=offline, output_path=out, agent_model=vllm_model, best_of_n=N,
                         max_new_tokens=8,
                         seed=3, device="cpu"))
    return out


def _judged(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line)["judge_result"] for line in handle]


@pytest.mark.parametrize("mode", ["original", "turn", "candidate"])
def test_each_score_tokens_mode_judges_as_the_hf_backend(tmp_path, sampled, vllm_model, mode):
    results = {}
    for backend in ("hf", "vllm"):
        out = str(tmp_path / f"{backend}.jsonl")
        rank(RankOptions(input_path=sampled, output_path=out, model_id=vllm_model,
                         score_tokens=mode,
                         backend=backend, device="cpu"))
        results[backend] = _judged(out)
    assert len(results["vllm"]) == 8
    for hf, ours in zip(results["hf"], results["vllm"]):
        assert ours == pytest.approx(hf, abs=JUDGE_TOLERANCE)
        # the same order wherever the hf backend tells two candidates apart
        for i in range(N):
            for j in range(N):
                if hf[i] > hf[j] + 2 * JUDGE_TOLERANCE:
                    assert ours[i] > ours[j], (mode, hf, ours)
        assert max(hf) - min(hf) > 10 * JUDGE_TOLERANCE  # there is an order to keep
