"""The fast decoding step of a plain Llama model (sweet_rl/models/llama_decode.py) gives
model(...)'s logits bit for bit, the shared-prompt sampler takes it only after one step agreed,
and models it does not reproduce keep model(...)."""

import pytest

from sweet_rl.models import llama_decode, shared_prompt
from sweet_rl.models.hf_generation import HFGenerator
from sweet_rl.seeding import candidate_seeds

torch = pytest.importorskip("torch")


def _llama(seed=0, **fields):
    from transformers import LlamaConfig, LlamaForCausalLM

    layout = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**{**layout, **fields})).eval()


def _prefilled(model, prompt_len, rows):
    ids = torch.randint(0, model.config.vocab_size, (1, prompt_len))  # [1, T]
    with torch.no_grad():
        return shared_prompt.prefill(model, ids, rows)[0]  # [rows, kv, T, d] per layer


@pytest.mark.parametrize("padded", [False, True])  # generate()'s decoding: no mask, or padding
@pytest.mark.parametrize("kv_heads", [2, 4])  # grouped-query attention, and one key per head
def test_the_fast_step_gives_model_calls_logits_bit_for_bit(kv_heads, padded):
    model = _llama(num_key_value_heads=kv_heads)
    assert llama_decode.supports(model)
    rows, prompt_len = 3, 7
    cache = _prefilled(model, prompt_len, rows)
    tokens = torch.randint(0, 96, (rows, 1))  # [rows, 1]
    position = torch.full((rows, 1), prompt_len)  # [rows, 1]
    mask = torch.ones((rows, prompt_len + 1), dtype=torch.long)  # [rows, T + 1]
    if padded:  # rows 1 and 2 start with 2 and 5 pads, as left padding leaves them
        mask[1, :2] = mask[2, :5] = 0
        position = mask.cumsum(-1)[:, -1:] - 1
    fast = llama_decode.LlamaStep(model, llama_decode.CacheLayers(cache, grow=False))
    with torch.no_grad():
        for step in range(12):
            fast.store = llama_decode.CacheLayers(cache, grow=False)  # before model(...) grows it
            got = fast.step(tokens, position, mask if padded else None)
            out = model(input_ids=tokens, attention_mask=mask, position_ids=position,
                        use_cache=True, logits_to_keep=1, cache=cache)
            expected = out.logits[:, -1, :]  # [rows, V]
            assert got.shape == expected.shape and torch.equal(got, expected), step
            tokens = expected.argmax(-1, keepdim=True)  # [rows, 1]
            position = position + 1
            mask = torch.cat([mask, mask.new_ones((rows, 1))], dim=-1)


def test_buffers_written_in_place_give_the_cache_s_logits():
    model = _llama()
    rows, prompt_len = 4, 9
    grown = _prefilled(model, prompt_len, rows)
    fast = llama_decode.LlamaStep(model, llama_decode.Buffers(grown, 10))  # a copy of it
    slow = llama_decode.LlamaStep(model, llama_decode.CacheLayers(grown))
    tokens, position = torch.randint(0, 96, (rows, 1)), torch.full((rows, 1), prompt_len)
    with torch.no_grad():
        for step in range(10):  # every place of the buffer, the last included
            expected = slow.step(tokens, position)
            assert torch.equal(fast.step(tokens, position), expected), step
            tokens, position = expected.argmax(-1, keepdim=True), position + 1
    assert grown.get_seq_length() == prompt_len + 10


@pytest.fixture(scope="module")
def base(tiny_model_dir):
    return HFGenerator(tiny_model_dir, device="cpu", max_new_tokens=20, temperature=1.0,
                       batch_size=8)


def test_the_sampler_checks_one_step_then_decodes_fast_with_generates_tokens(
        base, monkeypatch):
    prompt = base.format([{"role": "user", "content": "Write f."}])
    seeds = candidate_seeds(3, 8)
    with monkeypatch.context() as patch:
        patch.setattr(shared_prompt, "applies", lambda model, chunk: False)
        plain = base.generate_with_stops([prompt] * 8, seeds=seeds)  # generate()
    steps = []
    real = llama_decode.LlamaStep.step
    monkeypatch.setattr(llama_decode.LlamaStep, "step",
                        lambda self, *a: steps.append(1) or real(self, *a))
    monkeypatch.delattr(base.model, llama_decode._VERDICT, raising=False)
    first = base.generate_with_stops([prompt] * 8, seeds=seeds)
    assert llama_decode.verdict(base.model, "plain") is True  # the first step agreed
    assert first == plain and len(steps) > 1
    assert base.generate_with_stops([prompt] * 8, seeds=seeds) == plain  # checked: fast only


def test_a_step_that_differs_is_dropped_and_model_call_decodes(base, monkeypatch):
    prompt = base.format([{"role": "user", "content": "Write g."}])
    seeds = candidate_seeds(4, 8)
    expected = base.generate_with_stops([prompt] * 8, seeds=seeds)
    real = llama_decode.LlamaStep.step
    monkeypatch.setattr(llama_decode.LlamaStep, "step",
                        lambda self, *a: real(self, *a) + 1e-6)  # off by a little
    monkeypatch.delattr(base.model, llama_decode._VERDICT, raising=False)
    assert base.generate_with_stops([prompt] * 8, seeds=seeds) == expected
    assert llama_decode.verdict(base.model, "plain") is False
    assert llama_decode.fast_step(base.model, None, 8) is None  # never again for this model
    monkeypatch.delattr(base.model, llama_decode._VERDICT)


@pytest.mark.parametrize("change", ["rope scaling", "attention bias", "eager attention",
                                    "forward hook", "gelu", "other model type"])
def test_models_the_step_does_not_reproduce_keep_model_call(change):
    fields = {"rope scaling": {"rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                   "rope_theta": 10000.0}},
              "attention bias": {"attention_bias": True},
              "gelu": {"hidden_act": "gelu"}}.get(change, {})
    model = _llama(**fields)
    if change == "eager attention":
        model.config._attn_implementation = "eager"
    elif change == "forward hook":
        model.model.layers[1].mlp.register_forward_hook(lambda module, args, out: out * 2)
    elif change == "other model type":
        model.config.model_type = "mistral"
    assert not llama_decode.supports(model)
    assert llama_decode.supports(_llama())  # the same model without the change


def _padded_prompts(base):
    return [base.format([{"role": "user", "content": "Write f" + " with x" * (2 * k)}])
            for k in range(5)]  # five lengths: left padding in one batch


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_generate_on_a_padded_batch_decodes_through_the_step_with_the_same_tokens(
        base, monkeypatch, temperature):
    generator = HFGenerator("", device="cpu", max_new_tokens=20, temperature=temperature,
                            batch_size=8, model=base.model, tokenizer=base.tokenizer)
    prompts, seeds = _padded_prompts(base), candidate_seeds(6, 5)
    with monkeypatch.context() as patch:
        patch.setattr(llama_decode, "supports", lambda model: False)
        plain = generator.generate_with_stops(prompts, seeds=seeds)  # generate() alone
    steps = []
    real = llama_decode.LlamaStep.step
    monkeypatch.setattr(llama_decode.LlamaStep, "step",
                        lambda self, *a: steps.append(1) or real(self, *a))
    monkeypatch.delattr(base.model, llama_decode._VERDICT, raising=False)
    assert generator.generate_with_stops(prompts, seeds=seeds) == plain  # checked, then fast
    assert llama_decode.verdict(base.model, "padded") is True and len(steps) > 2
    assert generator.generate_with_stops(prompts, seeds=seeds) == plain
    assert "forward" not in vars(base.model)  # generate()'s model is itself again
    if temperature:
        assert len({g.text for g in plain}) > 1


def test_a_padded_step_that_differs_is_dropped_and_generate_decodes(base, monkeypatch):
    prompts, seeds = _padded_prompts(base), candidate_seeds(7, 5)
    expected = base.generate_with_stops(prompts, seeds=seeds)
    real = llama_decode.LlamaStep.step
    monkeypatch.setattr(llama_decode.LlamaStep, "step",
                        lambda self, *a: real(self, *a) + 1e-6)  # off by a little
    monkeypatch.delattr(base.model, llama_decode._VERDICT, raising=False)
    assert base.generate_with_stops(prompts, seeds=seeds) == expected
    assert llama_decode.verdict(base.model, "padded") is False
    calls = []
    monkeypatch.setattr(llama_decode.LlamaStep, "step", lambda self, *a: calls.append(1))
    assert base.generate_with_stops(prompts, seeds=seeds) == expected and not calls
    monkeypatch.delattr(base.model, llama_decode._VERDICT)


def test_calls_that_are_not_decoding_steps_are_model_calls_own(base):
    model = base.model
    ids = base.tokenizer(_padded_prompts(base)[:2], return_tensors="pt", padding=True,
                         add_special_tokens=False)
    with torch.no_grad():
        outside = model(**ids).logits  # [2, T, V]: every position, no cache
        with llama_decode.decoding(model):
            inside = model(**ids).logits
    assert torch.equal(inside, outside)


def test_a_step_the_comparison_cannot_run_counts_as_differing(base, monkeypatch):
    prompts, seeds = _padded_prompts(base), candidate_seeds(8, 5)
    expected = base.generate_with_stops(prompts, seeds=seeds)

    def broken(self, *args):
        raise RuntimeError("shapes it does not know")

    monkeypatch.setattr(llama_decode.LlamaStep, "step", broken)
    monkeypatch.delattr(base.model, llama_decode._VERDICT, raising=False)
    assert base.generate_with_stops(prompts, seeds=seeds) == expected
    assert llama_decode.verdict(base.model, "padded") is False
    monkeypatch.delattr(base.model, llama_decode._VERDICT)


def test_a_static_cache_keeps_model_calls_own_steps(base, monkeypatch):
    from transformers import LogitsProcessorList

    from sweet_rl.models.hf_generation import RowSampler

    ids = base.tokenizer(_padded_prompts(base)[:3], return_tensors="pt", padding=True,
                         add_special_tokens=False)
    calls = []
    monkeypatch.setattr(llama_decode.LlamaStep, "step", lambda self, *a: calls.append(1))

    def sample():
        with torch.no_grad(), llama_decode.decoding(base.model):
            return base.model.generate(**ids, max_new_tokens=6, do_sample=False,
                                       cache_implementation="static", pad_token_id=5,
                                       logits_processor=LogitsProcessorList(
                                           [RowSampler([1, 2, 3], 1.0)]))  # [3, T + new]

    monkeypatch.delattr(base.model, llama_decode._VERDICT, raising=False)
    first = sample()
    assert not calls and llama_decode.verdict(base.model, "padded") is None
    assert torch.equal(sample(), first)
