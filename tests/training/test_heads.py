"""The pooled scalar head on its own: masked mean pooling, a hand-set head on the tiny model,
its seeded initialisation, and scores that padding never changes."""

import pytest
import torch

from sweet_rl.training.heads import ScalarCritic, ScalarHeadModel, load_backbone, mean_pool


def test_mean_pool_by_hand():
    """hidden (2 rows, 3 positions, 2 units); row 0 has 2 real tokens, row 1 has 1, row 2 none.

    row 0: ([1, 2] + [3, 6]) / 2 = [2, 4]      (position 2's [100, 100] is padding)
    row 1: [5, -1] / 1           = [5, -1]
    row 2: no real token         = [0, 0]      (no division by zero)
    """
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 6.0], [100.0, 100.0]],
                           [[5.0, -1.0], [7.0, 7.0], [9.0, 9.0]],
                           [[4.0, 4.0], [4.0, 4.0], [4.0, 4.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    pooled = mean_pool(hidden, mask)
    assert pooled.shape == (3, 2) and pooled.dtype == torch.float32
    assert pooled.tolist() == [[2.0, 4.0], [5.0, -1.0], [0.0, 0.0]]
    # bf16 hidden states are summed in float32
    assert mean_pool(hidden.bfloat16(), mask).dtype == torch.float32


def encode(tokenizer, texts):
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def test_hand_set_head_scores_the_mean_of_one_hidden_unit(tiny_model_dir):
    """weight = one-hot on unit 3, bias 0.25: the score of a text is 0.25 + the mean over its
    tokens of unit 3 of the last hidden states (after the final norm), here taken from the
    causal LM's own forward with output_hidden_states, one text at a time (no padding)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    texts = ["<|begin_of_text|>def f(x): return x", "print list"]
    lm = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    expected = []
    with torch.no_grad():
        for ids in encode(tokenizer, texts):
            last = lm(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1]
            expected.append(0.25 + last[0, :, 3].mean().item())  # (T,) -> mean

    model = ScalarHeadModel(load_backbone(tiny_model_dir), seed=0).eval()
    with torch.no_grad():
        model.score_head.weight.zero_()
        model.score_head.weight[0, 3] = 1.0
        model.score_head.bias.fill_(0.25)
    ids = encode(tokenizer, texts)
    length = max(len(i) for i in ids)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([i + [pad] * (length - len(i)) for i in ids])  # (2, T)
    attention_mask = torch.tensor([[1] * len(i) + [0] * (length - len(i)) for i in ids])
    with torch.no_grad():
        scores = model(input_ids=input_ids, attention_mask=attention_mask)
    assert scores.shape == (2,) and scores.dtype == torch.float32
    assert scores.tolist() == pytest.approx(expected, abs=1e-5)
    assert len(ids[0]) != len(ids[1])  # the shorter row really was padded


def test_head_starts_small_zero_biased_and_fixed_by_the_seed(tiny_model_dir):
    backbone = load_backbone(tiny_model_dir)
    hidden = backbone.config.hidden_size
    first, again = ScalarHeadModel(backbone, seed=7), ScalarHeadModel(backbone, seed=7)
    other = ScalarHeadModel(backbone, seed=8)
    assert first.score_head.weight.shape == (1, hidden)
    assert torch.equal(first.score_head.weight, again.score_head.weight)
    assert not torch.equal(first.score_head.weight, other.score_head.weight)
    assert first.score_head.bias.tolist() == [0.0]
    assert first.score_head.weight.abs().max().item() < 5.0 / (hidden + 1)  # std 1 / (H + 1)
    # the state dict has the causal LM's own key names, and the head
    keys = set(first.state_dict())
    assert "model.embed_tokens.weight" in keys and {"score_head.weight", "score_head.bias"} < keys
    assert not any(key.startswith("lm_head") for key in keys)


def test_a_text_scores_the_same_alone_and_batched_with_a_longer_one(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    critic = ScalarCritic(ScalarHeadModel(load_backbone(tiny_model_dir), seed=3), tokenizer,
                          "regression")
    short = "<|begin_of_text|>x is 1"
    longer = "<|begin_of_text|>" + "def f(x): return x + 1 " * 20
    alone = critic.score([short])[0]
    together = critic.score([longer, short, longer], batch_size=3)
    assert together[1] == pytest.approx(alone, abs=1e-5)
    assert together[0] == pytest.approx(together[2], abs=1e-5)
    assert together[0] != pytest.approx(alone, abs=1e-3)  # different texts, different scores
    assert critic.score([]) == []
    # max_len cuts from the left and keeps the BOS, as training did
    cut = ScalarCritic(critic.model, tokenizer, "regression", max_len=8)
    ids = tokenizer(longer, add_special_tokens=False)["input_ids"]
    assert cut._ids(longer) == [ids[0]] + ids[-7:]
