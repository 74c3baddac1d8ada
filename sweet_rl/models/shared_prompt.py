"""N samples of one prompt with the prompt read once: Best-of-N's batches, made cheaper.

The candidate sampler (``sample_best_of_n``) and the Best-of-N agent ask for N continuations
of one prompt, and ``generate()`` then runs the prompt through the model N times: on the CPU
with the miniature's tiny model that prefill is about two thirds of a batch's time. Here the
prompt is run once, its key/value cache copied to the N rows, and the rows decoded together.

The result is the one ``generate()`` gives, token for token: the prompt's per-row arithmetic
does not depend on how many rows share the batch (a row's cache is the same whether one row
or N are prefilled), the first logits come from the same final projection over N rows, and
every later step passes ``generate()``'s own inputs (the grown attention mask, positions,
cache positions, the last token, ``logits_to_keep=1``). Tests compare the two paths.

It applies only where that equivalence is known: a decoder whose logits are its output
projection of the final hidden states (:data:`PLAIN_DECODERS`), whose generation config adds
no logits processor of its own, and a batch of identical prompts.
"""

from __future__ import annotations

from typing import Optional, Sequence

from sweet_rl.models import llama_decode

# model types whose causal-LM head is ``lm_head(hidden)`` with nothing after it (no soft-capping,
# no scaling): the prefill's last hidden state turns into the same logits as in generate()
PLAIN_DECODERS = frozenset({"llama", "mistral", "qwen2", "qwen3"})

# generation-config fields that make generate() add processors or stopping rules; any of them
# away from its neutral value sends the batch through generate()
_NEUTRAL = {"repetition_penalty": (None, 1.0), "no_repeat_ngram_size": (None, 0),
            "encoder_no_repeat_ngram_size": (None, 0), "bad_words_ids": (None,),
            "min_length": (None, 0), "min_new_tokens": (None, 0), "suppress_tokens": (None,),
            "begin_suppress_tokens": (None,), "forced_bos_token_id": (None,),
            "forced_eos_token_id": (None,), "sequence_bias": (None,),
            "exponential_decay_length_penalty": (None,), "renormalize_logits": (None, False),
            "max_time": (None,), "stop_strings": (None,), "epsilon_cutoff": (None, 0.0),
            "eta_cutoff": (None, 0.0), "diversity_penalty": (None, 0.0),
            "watermarking_config": (None,), "guidance_scale": (None, 1.0),
            "num_beams": (None, 1)}


def applies(model, prompts: Sequence[str]) -> bool:
    """Whether :func:`generate_shared` gives generate()'s result for this batch."""
    if len(prompts) < 2 or any(p != prompts[0] for p in prompts):
        return False
    if getattr(model.config, "model_type", None) not in PLAIN_DECODERS:
        return False
    config = model.generation_config
    return all(getattr(config, name, None) in neutral for name, neutral in _NEUTRAL.items())


def generate_shared(model, input_ids, rows: int, max_new_tokens: int, stop_ids: Sequence[int],
                    pad_id: int, processor=None):
    """New tokens ``[rows, new]`` for one prompt ``input_ids`` ``[1, T]`` (no padding), as
    ``generate(do_sample=False, logits_processor=[processor])`` gives for ``rows`` copies:
    greedy over ``processor``'s scores (RowSampler's single finite token, or the raw logits
    when ``processor`` is None), finished rows padded with ``pad_id``, stopping when every row
    has stopped or after ``max_new_tokens``."""
    import torch

    device = input_ids.device
    name = llama_decode.cache_keyword(model)
    prompt_len = input_ids.shape[1]
    mask = torch.ones((1, prompt_len), dtype=torch.long, device=device)  # [1, T]
    positions = torch.arange(prompt_len, device=device).unsqueeze(0)  # [1, T]
    with torch.no_grad():
        cache, hidden = prefill(model, input_ids, rows)  # hidden [1, T, H]
        last = hidden[:, -1:, :].repeat(rows, 1, 1)  # [rows, 1, H]
        logits = model.get_output_embeddings()(last)[:, -1, :]  # [rows, V]
        sequences = input_ids.repeat(rows, 1)  # [rows, T]
        mask = mask.repeat(rows, 1)  # [rows, T]
        position = positions[:, -1:].repeat(rows, 1)  # [rows, 1]
        cache_position = torch.tensor([prompt_len - 1], device=device)  # [1]
        stops = torch.tensor(list(stop_ids), device=device)
        unfinished = torch.ones(rows, dtype=torch.bool, device=device)  # [rows]
        fast = llama_decode.fast_step(model, cache, max_new_tokens)  # None: model(...) decodes
        new = []
        for step in range(max_new_tokens):
            if step and fast is not None and llama_decode.verdict(model, "plain"):
                logits = fast.step(sequences[:, -1:], position)  # [rows, V]
            elif step:
                out = model(input_ids=sequences[:, -1:], attention_mask=mask,
                            position_ids=position, cache_position=cache_position,
                            use_cache=True, logits_to_keep=1, **{name: cache})
                logits = out.logits[:, -1, :]  # [rows, V]
                if fast is not None and not llama_decode.agrees(  # the model's first step
                        model, "plain", lambda: fast.step(sequences[:, -1:], position), logits):
                    fast = None
            scores = logits.to(copy=True, dtype=torch.float32)  # generate()'s copy
            if processor is not None:
                scores = processor(sequences, scores)  # [rows, V]
            token = scores.argmax(dim=-1)  # [rows]
            token = torch.where(unfinished, token, torch.full_like(token, pad_id))
            new.append(token)
            sequences = torch.cat([sequences, token[:, None]], dim=-1)  # [rows, T + step + 1]
            unfinished &= ~torch.isin(token, stops)
            if not bool(unfinished.any()):
                break
            mask = torch.cat([mask, mask.new_ones((rows, 1))], dim=-1)
            position = position + 1
            cache_position = cache_position[-1:] + 1
    return torch.stack(new, dim=1) if new else input_ids.new_zeros((rows, 0))  # [rows, new]


def prefill(model, input_ids, rows: int):
    """(a DynamicCache of the prompt ``input_ids`` [1, T] with every layer's keys and values
    repeated to ``rows`` rows [rows, kv, T, d], the decoder's last hidden states [1, T, H])."""
    import torch
    from transformers import DynamicCache

    prompt_len = input_ids.shape[1]
    cache = DynamicCache(config=model.config)
    hidden = model.get_decoder()(
        input_ids=input_ids,
        attention_mask=torch.ones((1, prompt_len), dtype=torch.long, device=input_ids.device),
        position_ids=torch.arange(prompt_len, device=input_ids.device).unsqueeze(0),
        use_cache=True, **{llama_decode.cache_keyword(model): cache}).last_hidden_state  # [1, T, H]
    cache.batch_repeat_interleave(rows)
    return cache, hidden


def prompt_ids(tokenizer, prompt: str, device: Optional[str]):
    """The prompt's ids ``[1, T]`` as the batch tokenizer call gives them (no special tokens
    added: the chat template wrote them)."""
    return tokenizer([prompt], return_tensors="pt", add_special_tokens=False)["input_ids"].to(
        device)
