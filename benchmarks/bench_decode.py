#!/usr/bin/env python
"""Decoding speed: the plain-Llama step (sweet_rl/models/llama_decode.py) against model(...).

    python benchmarks/bench_decode.py                      # the miniature's agent's shape
    python benchmarks/bench_decode.py --rows 16 --prompt_tokens 600 --rounds 7

A random Llama model of the miniature agent's shape (hidden 128, 2 layers, 4 heads of 32 over
2 key/value heads, vocabulary 1024; built here, no download) prefills one prompt, repeats its
cache to ``--rows`` rows, then decodes ``--steps`` tokens per row twice: with ``model(...)``
as ``generate()`` calls it, and with :class:`LlamaStep`, alternating, ``--rounds`` times. It
prints the median milliseconds per step of each, their ratio, and whether every step's logits
were equal bit for bit (the run fails if not). Then two whole generations with the step on
and off, whose tokens must be the same, the ratio of their medians being what a stage sees:
N samples of one prompt through ``shared_prompt.generate_shared`` (the sample stage, Best-of-N)
and ``generate()`` on a left-padded batch of ``--rows`` prompts of different lengths (the
``hf`` agent in simulate, evaluations).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _model(vocab: int, hidden: int, layers: int):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=hidden // 4, max_position_embeddings=8192,
                         tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(eos_token_id=4, pad_token_id=5)
    return model


def _steps(model, prompt_tokens: int, rows: int, steps: int, fast: bool):
    """(seconds per step, the logits of every step) decoding greedily after one prefill."""
    import torch

    from sweet_rl.models.llama_decode import Buffers, LlamaStep
    from sweet_rl.models.shared_prompt import prefill

    torch.manual_seed(1)
    ids = torch.randint(6, model.config.vocab_size, (1, prompt_tokens))  # [1, T]
    with torch.no_grad():
        cache = prefill(model, ids, rows)[0]
        step = LlamaStep(model, Buffers(cache, steps)) if fast else None
        tokens = torch.full((rows, 1), 7)  # [rows, 1]
        position = torch.full((rows, 1), prompt_tokens)  # [rows, 1]
        mask = torch.ones((rows, prompt_tokens + 1), dtype=torch.long)
        logits = []
        start = time.perf_counter()
        for _ in range(steps):
            if fast:
                out = step.step(tokens, position)
            else:
                out = model(input_ids=tokens, attention_mask=mask, position_ids=position,
                            cache_position=position[0], use_cache=True, logits_to_keep=1,
                            cache=cache).logits[:, -1, :]  # [rows, V]
            logits.append(out)
            tokens = out.argmax(-1, keepdim=True)
            position = position + 1
            mask = torch.cat([mask, mask.new_ones((rows, 1))], dim=-1)
        return (time.perf_counter() - start) / steps, logits


def _sampler(model, prompt_tokens: int, rows: int, steps: int, fast: bool):
    """(seconds, new tokens [rows, new]) for N sampled continuations of one prompt."""
    import torch

    from sweet_rl.models import llama_decode, shared_prompt
    from sweet_rl.models.hf_generation import RowSampler

    llama_decode.record(model, "plain", fast)  # on: checked already; off: never taken
    torch.manual_seed(2)
    ids = torch.randint(6, model.config.vocab_size, (1, prompt_tokens))
    start = time.perf_counter()
    tokens = shared_prompt.generate_shared(model, ids, rows, steps, [4], 5,
                                           RowSampler(list(range(rows)), 1.0, 1.0))
    return time.perf_counter() - start, tokens


def _batch(model, prompt_tokens: int, rows: int, steps: int, fast: bool):
    """(seconds, sequences) of generate() on ``rows`` left-padded prompts, sampled per row."""
    import torch
    from transformers import LogitsProcessorList

    from sweet_rl.models import llama_decode
    from sweet_rl.models.hf_generation import RowSampler

    torch.manual_seed(3)
    ids = torch.randint(6, model.config.vocab_size, (rows, prompt_tokens))  # [rows, T]
    mask = torch.ones_like(ids)
    for row in range(rows):  # row k has k * T / (2 rows) pads on the left
        mask[row, :row * prompt_tokens // (2 * rows)] = 0
    ids = ids.masked_fill(mask == 0, 5)
    llama_decode.record(model, "padded", fast)
    start = time.perf_counter()
    with torch.no_grad(), llama_decode.decoding(model):
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=steps,
                             do_sample=False, eos_token_id=[4], pad_token_id=5,
                             logits_processor=LogitsProcessorList(
                                 [RowSampler(list(range(rows)), 1.0, 1.0)]))
    return time.perf_counter() - start, out


def _compare(label: str, run, shape, rounds: int) -> bool:
    """Runs ``run`` with the step off and on, alternating; prints the medians."""
    import torch

    times = {False: [], True: []}
    same = True
    for _ in range(rounds):
        seconds_off, tokens_off = run(*shape, fast=False)
        seconds_on, tokens_on = run(*shape, fast=True)
        times[False].append(seconds_off)
        times[True].append(seconds_on)
        same &= torch.equal(tokens_off, tokens_on)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"{label}: model(...) {off:.3f} s, LlamaStep {on:.3f} s, ratio {on / off:.2f}; "
          f"tokens equal: {same}")
    return same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt_tokens", type=int, default=300)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--vocab_size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    model = _model(args.vocab_size, args.hidden_size, args.num_layers)
    shape = (model, args.prompt_tokens, args.rows, args.steps)
    _steps(*shape, fast=False), _steps(*shape, fast=True)  # warm-up
    times = {False: [], True: []}
    equal = True
    for _ in range(args.rounds):
        plain, plain_logits = _steps(*shape, fast=False)
        fast, fast_logits = _steps(*shape, fast=True)
        times[False].append(plain)
        times[True].append(fast)
        equal &= all(torch.equal(a, b) for a, b in zip(plain_logits, fast_logits))
    plain, fast = statistics.median(times[False]), statistics.median(times[True])
    print(f"decode step ({args.rows} rows after {args.prompt_tokens} prompt tokens, "
          f"{args.threads} thread(s)): model(...) {plain * 1e3:.2f} ms, LlamaStep "
          f"{fast * 1e3:.2f} ms, ratio {fast / plain:.2f}; logits equal: {equal}")
    same = _compare(f"sampler ({args.rows} samples of one prompt, up to {args.steps} tokens)",
                    _sampler, shape, args.rounds)
    padded = _compare(f"generate() ({args.rows} left-padded prompts, up to {args.steps} tokens)",
                      _batch, shape, args.rounds)
    return 0 if equal and same and padded else 1


if __name__ == "__main__":
    sys.exit(main())
