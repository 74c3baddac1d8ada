"""N samples of one prompt with the prompt read once give generate()'s result, token for token:
sampled, greedy and top-p, rows that stop early and rows cut at the length limit."""

import pytest

from sweet_rl.models import shared_prompt
from sweet_rl.models.hf_generation import HFGenerator
from sweet_rl.seeding import candidate_seeds

MESSAGES = [{"role": "user", "content": "Write f."},
            {"role": "assistant", "content": "What should f return?"},
            {"role": "user", "content": "The sum of its two arguments."}]


@pytest.fixture(scope="module")
def base(tiny_model_dir):
    return HFGenerator(tiny_model_dir, device="cpu", max_new_tokens=24, temperature=1.0,
                       batch_size=6)


def _both(base, monkeypatch, prompts, **kwargs):
    """(generate()'s generations, the shared path's, how often the shared path ran)."""
    calls = []
    real = shared_prompt.generate_shared

    def counted(*args, **kw):
        calls.append(args[2])  # the rows
        return real(*args, **kw)

    with monkeypatch.context() as patch:
        patch.setattr(shared_prompt, "applies", lambda model, chunk: False)
        plain = base.generate_with_stops(prompts, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(shared_prompt, "generate_shared", counted)
        shared = base.generate_with_stops(prompts, **kwargs)
    return plain, shared, calls


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_the_shared_prompt_path_gives_generates_samples(base, monkeypatch, temperature, top_p):
    prompt = base.format(MESSAGES)
    generator = HFGenerator("", device="cpu", max_new_tokens=24, temperature=temperature,
                            top_p=top_p, batch_size=6, model=base.model,
                            tokenizer=base.tokenizer)
    seeds = candidate_seeds(5, 8)
    plain, shared, calls = _both(generator, monkeypatch, [prompt] * 8, seeds=seeds)
    assert calls == [6, 2]  # two batches of one prompt: both took the shared path
    assert shared == plain
    if temperature:
        assert len({g.text for g in plain}) > 1


def test_rows_that_stop_early_are_padded_as_generate_pads_them(base, monkeypatch):
    prompt = base.format(MESSAGES)
    seeds = candidate_seeds(2, 6)
    first = base.generate_with_stops([prompt] * 6, seeds=seeds)
    # a token some rows write early: as a stop, those rows end while others go on
    ids = [base.tokenizer(g.text, add_special_tokens=False)["input_ids"] for g in first]
    stop = next(row[2] for row in ids if len(row) > 3)
    generator = HFGenerator("", device="cpu", max_new_tokens=24, temperature=1.0,
                            batch_size=6, model=base.model, tokenizer=base.tokenizer)
    generator.stop_ids = sorted({*generator.stop_ids, stop})
    plain, shared, calls = _both(generator, monkeypatch, [prompt] * 6, seeds=seeds)
    assert calls == [6] and shared == plain
    assert any(g.stop_id == stop for g in plain)  # some rows stopped on it
    assert len({g.tokens for g in plain}) > 1  # at different lengths


def test_only_batches_of_one_plain_prompt_take_the_shared_path(base, monkeypatch):
    one, other = base.format(MESSAGES), base.format(MESSAGES[:1])
    assert shared_prompt.applies(base.model, [one] * 3)
    assert not shared_prompt.applies(base.model, [one])  # nothing to share
    assert not shared_prompt.applies(base.model, [one, other, one])
    monkeypatch.setattr(base.model.generation_config, "repetition_penalty", 1.2)
    assert not shared_prompt.applies(base.model, [one] * 3)  # generate() would add a processor
    monkeypatch.undo()
    monkeypatch.setattr(base.model.config, "model_type", "gemma2")  # soft-capped logits
    assert not shared_prompt.applies(base.model, [one] * 3)
