#!/usr/bin/env python
"""Ranking speed: the shared-prompt KV cache vs scoring every candidate with its full prompt.

    python benchmarks/bench_rank_cache.py                       # 4 layers, hidden 512
    python benchmarks/bench_rank_cache.py --hidden_size 256 --num_layers 2 --prompt_tokens 500

A random Llama model (built locally, no download) scores 16 candidates of ~64 tokens after a
~1000-token prompt, through :class:`sweet_rl.stepwise.scoring.ContinuationScorer` -- the code
behind ``scripts/rank_best_of_n.py``, with its default ``--score_tokens original`` span (every
token of prompt + candidate after the first; ``--score_tokens candidate`` scores the
candidates only) -- once with the prompt cache and once with ``prompt_cache=False``, same
batch size (all 16 candidates in one forward). Each variant runs
in its own child process so its peak resident memory (``ru_maxrss``) is its own; each child
warms up once, then times ``--repeats`` turns and reports the median turn (robust to other
processes' bursts on a shared machine). Target: the cache is at least 3x faster.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def child(model_dir: str, cached: bool, candidates: int, prompt_tokens: int,
          candidate_tokens: int, repeats: int, threads: int, score_tokens: str) -> None:
    import torch

    if threads > 0:
        torch.set_num_threads(threads)

    from sweet_rl.stepwise.scoring import ContinuationScorer, encode
    from sweet_rl.stepwise.spans import critic_rows

    scorer = ContinuationScorer(model_dir, device="cpu", dtype="float32", batch_size=candidates,
                                prompt_cache=cached)
    words = "def f return x range len list dict while True print ".split()
    prompt, n = "<|begin_of_text|>", 0
    while n < prompt_tokens:  # grow the prompt to the token budget
        prompt += " ".join(words[(n + k) % len(words)] for k in range(50)) + "\n"
        n = len(encode(scorer.tokenizer, prompt))
    cands = [" ".join(words[(k * 3 + j) % len(words)] for j in range(candidate_tokens)) + f" {k}"
             for k in range(candidates)]

    def turn():  # what rank_best_of_n does per turn: tokenise the critic's texts, score spans
        return scorer.score_spans(*critic_rows(scorer.tokenizer, prompt, cands, score_tokens))

    turn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        scores = turn()
        times.append(time.perf_counter() - start)
    # The median turn resists other processes' bursts on a shared machine.
    seconds = statistics.median(times)
    cand_len = sum(c for _, c in scores) / len(scores)
    print(json.dumps({"cached": cached, "seconds": seconds, "total_seconds": sum(times),
                      "turns": repeats, "candidates_per_second": candidates / seconds,
                      "prompt_tokens": n, "mean_scored_tokens": cand_len,
                      "first_scores": [s for s, _ in scores[:3]],
                      "threads": torch.get_num_threads(),
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden_size", type=int, default=512)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--prompt_tokens", type=int, default=1000)
    parser.add_argument("--candidate_tokens", type=int, default=64)
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch CPU threads (0: torch's default); 1 is steadier on a busy machine",
    )
    parser.add_argument("--score_tokens", default="original",
                        choices=["original", "turn", "candidate"])
    parser.add_argument("--child", choices=["cached", "full"])
    parser.add_argument("--model_dir")
    args = parser.parse_args()
    if args.child:
        child(args.model_dir, args.child == "cached", args.candidates, args.prompt_tokens,
              args.candidate_tokens, args.repeats, args.threads, args.score_tokens)
        return

    from sweet_rl.models.tiny_model import build_tiny_model

    with tempfile.TemporaryDirectory() as workdir:
        model_dir = build_tiny_model(os.path.join(workdir, "model"), seed=0,
                                     hidden_size=args.hidden_size, num_layers=args.num_layers)
        results = {}
        for variant in ("full", "cached"):
            cmd = [sys.executable, os.path.abspath(__file__), "--child", variant,
                   "--model_dir", model_dir, "--candidates", str(args.candidates),
                   "--prompt_tokens", str(args.prompt_tokens), "--repeats", str(args.repeats),
                   "--candidate_tokens", str(args.candidate_tokens), "--threads", str(args.threads),
                   "--score_tokens", args.score_tokens]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results[variant] = json.loads(out.strip().splitlines()[-1])
    full, cached = results["full"], results["cached"]
    print(f"model: Llama hidden {args.hidden_size}, {args.num_layers} layers; "
          f"{args.candidates} candidates of {args.candidate_tokens} words after a "
          f"{cached['prompt_tokens']}-token prompt, --score_tokens {args.score_tokens} "
          f"(~{cached['mean_scored_tokens']:.0f} tokens scored each); "
          f"{cached['turns']} turns timed per variant; {cached['threads']} CPU threads")
    for name, r in (("full prompt per candidate", full), ("shared prompt cache", cached)):
        print(
            f"{name:>26}: {r['seconds']:.3f}s per turn (median; {r['total_seconds']:.2f}s in all), "
            f"{r['candidates_per_second']:.1f} candidates/s, "
            f"peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB"
        )
    diff = max(abs(a - b) for a, b in zip(full["first_scores"], cached["first_scores"]))
    print(f"speed-up: {full['seconds'] / cached['seconds']:.2f}x (target >= 3x); "
          f"max score difference {diff:.2e}")


if __name__ == "__main__":
    main()
