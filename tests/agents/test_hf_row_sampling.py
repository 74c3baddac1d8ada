"""Sampling with the ``hf`` backend is reproducible per row, whatever the batching."""

import pytest
import torch

from sweet_rl.models.hf_generation import HFGenerator, RowSampler
from sweet_rl.seeding import candidate_seeds

# Prompts of different lengths, so each batch pads them differently.
MESSAGES = [
    [{"role": "user", "content": "Write a function that adds two numbers."}],
    [{"role": "user", "content": "Hi."}],
    [
        {"role": "user", "content": "Write f."},
        {"role": "assistant", "content": "What should f return?"},
        {"role": "user", "content": "The sum, I think."},
    ],
    [{"role": "user", "content": "Hi."}],
]
SEEDS = [11, 12, 13, 14]


@pytest.fixture(scope="module")
def base(tiny_model_dir):
    return HFGenerator(tiny_model_dir, device="cpu", max_new_tokens=10, temperature=1.0)


def _sampler(base, batch_size):
    return HFGenerator("", device=base.device, max_new_tokens=10, temperature=1.0,
                       batch_size=batch_size, model=base.model, tokenizer=base.tokenizer)


def test_same_rows_in_batches_of_1_2_and_all_give_the_same_samples(base):
    prompts = [base.format(m) for m in MESSAGES]
    runs = {size: _sampler(base, size).generate_with_stops(prompts, seeds=SEEDS)
            for size in (1, 2, len(prompts))}
    assert runs[1] == runs[2] == runs[len(prompts)]
    texts = [g.text for g in runs[1]]
    assert texts[1] != texts[3]  # the same prompt under another seed samples anew


def test_candidates_of_one_prompt_differ_and_repeat(base):
    prompt = base.format(MESSAGES[0])
    seeds = candidate_seeds(3, 4)
    first = base.generate([prompt] * 4, seeds=seeds)
    assert len(set(first)) > 1  # distinct seeds, distinct candidates
    assert _sampler(base, 3).generate([prompt] * 4, seeds=seeds) == first


def test_unseeded_sampling_follows_torchs_global_seed(base):
    prompts = [base.format(MESSAGES[1])] * 2
    torch.manual_seed(0)
    a = base.generate(prompts)
    torch.manual_seed(0)
    assert base.generate(prompts) == a


def test_seeds_must_match_prompts(base):
    with pytest.raises(ValueError, match="2 seeds for 1 prompts"):
        base.generate([base.format(MESSAGES[0])], seeds=[1, 2])


def test_row_sampler_picks_one_token_per_row_independently_of_its_batch():
    scores = torch.tensor([[0.0, 1.0, 2.0, float("-inf")],
                           [3.0, float("-inf"), 0.0, 0.0]])  # [B=2, V=4]
    ids = torch.zeros(2, 1, dtype=torch.long)  # [B, T]
    both = RowSampler([5, 6], temperature=1.0)
    alone = RowSampler([6], temperature=1.0)
    for _ in range(50):
        picked = both(ids, scores)  # [2, 4]
        assert ((picked == 0).sum(-1) == 1).all() and torch.isinf(picked).sum() == 6
        assert torch.equal(picked[1:], alone(ids[1:], scores[1:]))  # row 1, with or without row 0
        chosen = picked.argmax(-1)  # [2]
        assert chosen[0] != 3 and chosen[1] != 1  # tokens without mass are never drawn


def test_row_sampler_draws_follow_the_tempered_distribution():
    scores = torch.log(torch.tensor([[0.7, 0.2, 0.1]]))  # [1, 3]
    ids = torch.zeros(1, 1, dtype=torch.long)
    sampler = RowSampler([0], temperature=1.0)
    counts = torch.bincount(torch.cat([sampler(ids, scores).argmax(-1) for _ in range(4000)]),
                            minlength=3)
    assert torch.allclose(counts / 4000.0, torch.tensor([0.7, 0.2, 0.1]), atol=0.03)
    # top_p 0.75 keeps the two likeliest; a low temperature then nearly always picks the first
    narrow = RowSampler([0], temperature=0.05, top_p=0.75)
    picks = torch.cat([narrow(ids, scores).argmax(-1) for _ in range(200)])
    assert set(picks.tolist()) <= {0, 1} and (picks == 0).float().mean() > 0.95


def test_each_generation_counts_its_own_tokens_up_to_its_stop():
    from sweet_rl.models.hf_generation import first_stop, generated_length

    stops = [7, 9]
    # a row that stopped (the pad after its stop is not its own), one cut at the budget
    assert generated_length([4, 5, 9, 0, 0], stops) == 3 and first_stop([4, 5, 9, 0, 0], stops) == 9
    assert generated_length([4, 5, 6], stops) == 3 and first_stop([4, 5, 6], stops) is None
    assert generated_length([7], stops) == 1
