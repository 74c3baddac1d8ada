#!/usr/bin/env python
"""The sample and rank stages on vLLM against transformers (``hf``), on the CPU.

    bash scripts/vllm_env.sh && .venv-vllm/bin/python benchmarks/bench_vllm.py
    .venv-vllm/bin/python benchmarks/bench_vllm.py --tasks 4 --max_new_tokens 64   # quicker

Runs in the vLLM environment (vLLM's CPU build; transformers is there too). The model is the
miniature's agent architecture (a tiny Llama, hidden size 128, 2 layers, heads of 32, the
miniature's tokenizer; random weights, so candidates run to ``--max_new_tokens``). The records
are the miniature's offline turns: its scripted dialogues (asker, guesser, waster) on
``--tasks`` late-fee train tasks with its short agent prompt, the first half of the
trajectories (its ``--data_fraction 0.5``).

* Sampling: ``--n`` candidates per turn and their reference log-probs, the sample stage's
  samplers: ``hf`` (:class:`sweet_rl.stepwise.sampling.HFSampler`, batches of 16, its prompt
  cache) against vLLM (:class:`sweet_rl.stepwise.vllm_backend.VLLMSampler`: one request per
  candidate, prefix caching). Tokens/s counts the tokens generated (stop tokens included),
  over the whole stage's work: sampling and the reference log-probs.
* Ranking: the vLLM candidates scored by the rank stage's scorers (``--score_tokens
  original``): ``hf`` with the shared-prompt KV cache against vLLM's prompt log-probs (its
  prefix caching is on, but V1 reads no cached prefix for a request that asks for prompt
  log-probs). Tokens/s counts the scored tokens.

vLLM runs as a user's run does (the spawned engine process, one core bound to it, the other
left to the caller); its start-up is reported apart and not in the rates. Each side runs once;
the figures are from that one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def build(folder: str, tasks: int):
    """The model and the miniature's offline turn records (prompts)."""
    from sweet_rl.recipes.mini.dialogues import STYLES, build_mini_trajectories
    from sweet_rl.recipes.mini.tasks import corpus, generate_tasks
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.models.tiny_model import build_tiny_model
    from sweet_rl.recipes.mini import AGENT_PROMPT
    from sweet_rl.stepwise.turns import fraction_count, turn_records

    model = build_tiny_model(os.path.join(folder, "model"), seed=0, hidden_size=128,
                             num_layers=2, extra_text=corpus(["late_fee"]))
    with open(AGENT_PROMPT, encoding="utf-8") as handle:
        prompt = handle.read()
    trajectories = build_mini_trajectories(
        load_tokenizer(model), generate_tasks(tasks, seed=0, families=["late_fee"]), STYLES,
        agent_prompt=prompt)
    kept = trajectories[:fraction_count(len(trajectories), 0.5)]
    for trajectory in kept:
        trajectory.reward = 0.0  # sampling never reads it
    return model, [r.input for t in kept for r in turn_records(t)]


def rate(tokens: int, seconds: float) -> str:
    return f"{tokens / seconds:,.0f} tokens/s ({tokens:,} tokens in {seconds:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max_new_tokens", type=int, default=192)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    import torch

    from sweet_rl.seeding import row_seed
    from sweet_rl.stepwise.sampling import HFSampler
    from sweet_rl.stepwise.scoring import ContinuationScorer
    from sweet_rl.stepwise.vllm_backend import VLLMSampler, VLLMScorer

    folder = tempfile.mkdtemp(prefix="bench-vllm-")
    model, prompts = build(folder, args.tasks)
    seeds = [row_seed(args.seed, i) for i in range(len(prompts))]
    print(f"{len(prompts)} turns, {args.n} candidates each, up to {args.max_new_tokens} tokens;"
          f" torch threads {torch.get_num_threads()}")

    hf = HFSampler(model, max_new_tokens=args.max_new_tokens, device="cpu", dtype="float32")
    generated = count_generated(hf.generator)
    started = time.perf_counter()
    hf.sample(prompts, args.n, seeds)
    hf_seconds = time.perf_counter() - started
    hf_tokens = sum(generated)

    started = time.perf_counter()
    sampler = VLLMSampler(model, max_new_tokens=args.max_new_tokens, seed=args.seed)
    start_up = time.perf_counter() - started
    started = time.perf_counter()
    ours = sampler.sample(prompts, args.n, seeds)
    vllm_seconds = time.perf_counter() - started
    vllm_tokens = sum(c for _, scores in ours for _, c in scores)
    sampler.close()
    print(f"sampling  hf:   {rate(hf_tokens, hf_seconds)}")
    print(f"sampling  vLLM: {rate(vllm_tokens, vllm_seconds)} (engine start {start_up:.1f} s)")
    print(f"sampling  vLLM / hf: {vllm_tokens / vllm_seconds / (hf_tokens / hf_seconds):.1f}x")

    tokenizer = hf.scorer.tokenizer
    items = [critic_items_for(tokenizer, p, texts) for p, (texts, _) in zip(prompts, ours)]
    scored = sum(len(row) - start for rows, starts in items for row, start in zip(rows, starts))
    cached = ContinuationScorer(model=hf.generator.model, tokenizer=tokenizer, batch_size=16,
                                prompt_cache=True)
    started = time.perf_counter()
    for rows, starts in items:
        cached.score_spans(rows, starts)
    hf_seconds = time.perf_counter() - started
    scorer = VLLMScorer(model, seed=args.seed)
    started = time.perf_counter()
    scorer.score_many(items)
    vllm_seconds = time.perf_counter() - started
    scorer.close()
    print(f"ranking   hf (prompt cache):     {rate(scored, hf_seconds)}")
    print(f"ranking   vLLM (prefix caching): {rate(scored, vllm_seconds)}")
    print(f"ranking   vLLM / hf: {hf_seconds / vllm_seconds:.1f}x")


def count_generated(generator) -> list:
    """Count the tokens ``generator``'s model generates, per row, up to and with its stop
    token: what vLLM's ``token_ids`` hold (the hf sampler's scores count the text's tokens as
    it re-tokenises them, which for a random model's byte soup is not the same number)."""
    counts: list = []
    generate = generator.model.generate

    def counting(**kwargs):
        out = generate(**kwargs)
        for row in out[:, kwargs["input_ids"].shape[1]:].tolist():
            stop = next((i for i, t in enumerate(row) if t in generator.stop_ids), None)
            counts.append(len(row) if stop is None else stop + 1)
        return out

    generator.model.generate = counting
    return counts


def critic_items_for(tokenizer, prompt, texts):
    """The rank stage's token rows for one turn (``--score_tokens original``; the critic's
    context is the prompt itself here: these records carry no reference)."""
    from sweet_rl.stepwise.spans import critic_rows

    return critic_rows(tokenizer, prompt, texts, "original")


if __name__ == "__main__":
    main()
