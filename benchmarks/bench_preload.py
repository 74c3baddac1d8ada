#!/usr/bin/env python
"""Stage commands forked from a preloaded server against a fresh interpreter per command.

    python benchmarks/bench_preload.py              # 4 commands of each kind
    python benchmarks/bench_preload.py --commands 8

The miniature's recipes start dozens of short stage commands, each of which imports torch and
transformers first (sweet_rl/recipes/mini/forkserver.py). This runs the same real stage, a
2-step ``train_sft`` of a tiny random Llama (built here, no download), through the recipes'
scheduler with ``preload`` on and off, alternating (fresh, forked, fresh, ...) so that a busy
neighbour on a shared machine slows both alike, and prints the median wall seconds per command
of each, their ratio, and the server's one-off start (the first forked command). Every
command writes its own folder, and the script checks that every run wrote the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

PROMPT = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n")


def row(question: str) -> dict:
    """A successful one-turn trajectory in evaluate's layout (rejection fine-tuning's input)."""
    answer = f"I WANT TO ANSWER: {question}"
    return {"task": {"problem_description": question, "ground_truth": question},
            "dialogue_history": [{"role": "user", "content": question},
                                 {"role": "assistant", "content": answer,
                                  "input": PROMPT.format(q=question), "output": answer}],
            "reward": 1.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=4, help="commands of each kind")
    args = parser.parse_args()

    from sweet_rl.models.tiny_model import build_tiny_model
    from sweet_rl.recipes.mini.schedule import Scheduler

    work = tempfile.mkdtemp(prefix="bench_preload_")
    model = build_tiny_model(os.path.join(work, "model"), seed=0)
    data = os.path.join(work, "rows.jsonl")
    with open(data, "w", encoding="utf-8") as handle:
        for q in ("def f", "return x", "print list", "import len"):
            handle.write(json.dumps(row(q)) + "\n")
    runs = {True: Scheduler(1, 1, os.path.join(work, "logs"), preload=True),
            False: Scheduler(1, 1, os.path.join(work, "logs"), preload=False)}
    seconds = {True: [], False: []}
    digests = set()
    for i in range(args.commands + 1):  # the first forked command starts the server
        for preload in (False, True):
            if i == 0 and not preload:
                continue
            out = os.path.join(work, f"sft_{i}_{preload}")
            started = time.perf_counter()
            run = runs[preload]  # the stage's output goes to its step's log
            run.finish(run.start(f"sft_{i}_{preload}", run.stage, "train_sft", "--pretrain",
                                 model, "--dataset", data, "--save_path", out, "--max_epochs",
                                 "1", "--train_batch_size", "2", "--micro_train_batch_size",
                                 "1", "--seed", "0"))
            seconds[preload].append(time.perf_counter() - started)
            with open(os.path.join(out, "model.safetensors"), "rb") as weights:
                digests.add(hashlib.sha256(weights.read()).hexdigest())
    first = seconds[True].pop(0)
    fresh, forked = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"fresh interpreter: {fresh:.2f} s per command (median of {len(seconds[False])})")
    print(f"forked, preloaded: {forked:.2f} s per command (median of {len(seconds[True])}); "
          f"the first, with the server's start: {first:.2f} s")
    print(f"ratio forked/fresh: {forked / fresh:.2f}; every run wrote the same weights: "
          f"{len(digests) == 1}")
    shutil.rmtree(work)
    if len(digests) != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
