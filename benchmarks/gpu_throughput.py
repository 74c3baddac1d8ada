#!/usr/bin/env python
"""Throughput of the sample and rank stages' own code, for the GPU check (benchmarks/gpu_check.py).

    python benchmarks/gpu_throughput.py sample MODEL OFFLINE SAMPLED --device cuda
    python benchmarks/gpu_throughput.py rank MODEL SAMPLED --device cuda

``sample``: the ``hf`` backend of scripts/sample_best_of_n.py (HFSampler: N candidates per
turn in one generate batch, then their reference log-probs under the same model) on the turns
of the offline records, one turn after another as the stage goes, until ``--seconds`` have
passed (at least two turns). Tokens are the ones generated (a candidate's reply tokens and
the end-of-turn token it stopped on), per second of generation and reference scoring
together. The step records it writes are the rank step's input.

``rank``: the critic of scripts/rank_best_of_n.py (``--critic_type logprob``, the shared-prompt
cache on, ``--score_tokens original``) over those step records, ``--chunk`` turns per call
as the stage does, again and again until ``--seconds`` have passed; candidates per second.

Both load the model first and run one warm-up turn outside the timing; each prints one JSON
line with its figures (and the device's peak memory on a GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _synchronize(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _peak(device: str) -> dict:
    import torch

    if not str(device).startswith("cuda"):
        return {}
    return {"peak_gpu_allocated_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1)}


def sample(args) -> dict:
    from sweet_rl.io import append_jsonl
    from sweet_rl.seeding import row_seed
    from sweet_rl.stepwise.sampling import build_sampler, with_candidates
    from sweet_rl.stepwise.turns import read_turn_records

    records, _ = read_turn_records(args.offline, 1.0)
    sampler = build_sampler("hf", args.model, 1.0, args.max_new_tokens, args.device, "auto",
                            args.batch_size, args.seed)
    sampler.sample([records[-1].input], args.n, [row_seed(args.seed, len(records))])  # warm-up
    _synchronize(args.device)
    if os.path.exists(args.sampled):
        os.remove(args.sampled)
    turns = prompt_tokens = 0
    before = sampler.generated_tokens
    start = time.perf_counter()
    while turns < len(records) and (turns < 2 or time.perf_counter() - start < args.seconds):
        record = records[turns]
        (outputs, scores), = sampler.sample([record.input], args.n,
                                            [row_seed(args.seed, turns)])
        append_jsonl(args.sampled, [with_candidates(record, outputs, scores)])
        prompt_tokens += len(sampler.generator.tokenizer(
            record.input, add_special_tokens=False)["input_ids"])
        turns += 1
    _synchronize(args.device)
    seconds = time.perf_counter() - start
    tokens = sampler.generated_tokens - before
    return {"turns": turns, "candidates": turns * args.n, "generated_tokens": tokens,
            "mean_prompt_tokens": round(prompt_tokens / turns),
            "max_new_tokens": args.max_new_tokens, "seconds": round(seconds, 2),
            "tokens_per_second": round(tokens / seconds, 1),
            "turns_per_second": round(turns / seconds, 3), **_peak(args.device)}


def rank(args) -> dict:
    from sweet_rl.stepwise.ranking import parse_step
    from sweet_rl.stages.factory import build_judge
    from sweet_rl.io import read_jsonl
    from sweet_rl.stages.groups import EngineOptions, JudgeOptions

    samples = read_jsonl(args.sampled, parse_step)
    judge = build_judge(JudgeOptions(critic_type="logprob", model_id=args.model,
                                     score_tokens="original"),
                        EngineOptions(device=args.device, batch_size=args.batch_size))
    judge.judge(samples[:1])  # warm-up
    _synchronize(args.device)
    calls = turns = candidates = 0
    start = time.perf_counter()
    while calls < 2 or time.perf_counter() - start < args.seconds:
        first = (calls * args.chunk) % len(samples)
        chunk = (samples + samples)[first:first + min(args.chunk, len(samples))]
        judged = judge.judge(chunk)
        candidates += sum(len(scores) for scores in judged)
        turns += len(chunk)
        calls += 1
    _synchronize(args.device)
    seconds = time.perf_counter() - start
    return {"turns": turns, "candidates": candidates, "distinct_turns": len(samples),
            "seconds": round(seconds, 2),
            "candidates_per_second": round(candidates / seconds, 1), **_peak(args.device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    sampling = steps.add_parser("sample")
    sampling.add_argument("model")
    sampling.add_argument("offline")
    sampling.add_argument("sampled")
    sampling.add_argument("--n", type=int, default=8, help="candidates per turn")
    sampling.add_argument("--max_new_tokens", type=int, default=192)
    sampling.add_argument("--seed", type=int, default=0)
    ranking = steps.add_parser("rank")
    ranking.add_argument("model")
    ranking.add_argument("sampled")
    ranking.add_argument("--chunk", type=int, default=32, help="turns per judge call")
    for step in (sampling, ranking):
        step.add_argument("--device", default="cuda")
        step.add_argument("--batch_size", type=int, default=16)
        step.add_argument("--seconds", type=float, default=20.0, help="time to measure for")
    args = parser.parse_args()
    figures = sample(args) if args.step == "sample" else rank(args)
    print(json.dumps({"step": args.step, "device": args.device, **figures}))


if __name__ == "__main__":
    main()
