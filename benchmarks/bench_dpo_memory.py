#!/usr/bin/env python
"""Peak memory of DPO with precomputed reference log-probs vs a reference model kept in memory.

    python benchmarks/bench_dpo_memory.py                      # ~113M-parameter random Llama
    python benchmarks/bench_dpo_memory.py --hidden_size 512 --num_layers 4   # quicker

Each variant runs ``train_preference`` (the code behind ``scripts/train_dpo.py``) for a couple
of optimizer steps in its own child process, which reports its peak resident set size
(``ru_maxrss``). Both children load the same model, data and settings; the only difference is
``ref_in_memory``. Target: the saving is at least 80% of one copy of the model's weights.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def child(variant: str, model_dir: str, data: str, save_path: str) -> None:
    """Train a couple of steps and print {"peak_rss_bytes": ...} as the last line."""
    import logging

    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.training.run import train_preference

    logging.basicConfig(level=logging.WARNING)
    options = PreferenceOptions(pretrain=model_dir, dataset=data, save_path=save_path,
                   learning_rate=1e-5, max_epochs=1, train_batch_size=2, micro_train_batch_size=1,
                   max_len=1024, lr_warmup_ratio=0.0, mean_log_prob=True, nll_loss_coef=0.01,
                   ref_in_memory=variant == "in_memory", local_rank=-1)
    train_preference(options)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"variant": variant, "peak_rss_bytes": peak_kib * 1024}))


def make_inputs(workdir: str, hidden_size: int, num_layers: int) -> tuple:
    from sweet_rl.models.tiny_model import build_tiny_model

    model_dir = build_tiny_model(os.path.join(workdir, "model"), seed=0, hidden_size=hidden_size,
                                 num_layers=num_layers)
    header = "<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>"
    rows = []
    for i in range(4):  # 4 pairs, 2 per step -> 2 optimizer steps
        prompt = "<|begin_of_text|>" + header.format("user", "def f return x " * 40 + str(i))
        rows.append({"chosen": prompt + header.format("assistant", "I WANT TO ANSWER: def f " * 20),
                     "rejected": prompt + header.format("assistant", "I don't know. " * 20)})
    data = os.path.join(workdir, "pairs.jsonl")
    with open(data, "w") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    return model_dir, data


def weights_bytes(model_dir: str) -> int:
    from safetensors import safe_open

    total = 0
    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as handle:
        for key in handle.keys():
            tensor = handle.get_tensor(key)
            total += tensor.numel() * tensor.element_size()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hidden_size", type=int, default=1024)
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--child", choices=["precomputed", "in_memory"], help=argparse.SUPPRESS)
    parser.add_argument("--model_dir", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--save_path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model_dir, args.data, args.save_path)
        return

    with tempfile.TemporaryDirectory() as workdir:
        model_dir, data = make_inputs(workdir, args.hidden_size, args.num_layers)
        size = weights_bytes(model_dir)
        peaks = {}
        for variant in ("precomputed", "in_memory"):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", variant,
                                  "--model_dir", model_dir, "--data", data,
                                  "--save_path", os.path.join(workdir, variant)],
                                 capture_output=True, text=True, cwd=REPO)
            if out.returncode != 0:
                sys.exit(f"{variant} failed:\n{out.stderr[-3000:]}")
            peaks[variant] = json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_bytes"]
    mib = lambda b: f"{b / 2**20:8.1f} MiB"  # noqa: E731
    saving = peaks["in_memory"] - peaks["precomputed"]
    print(f"model: hidden {args.hidden_size}, {args.num_layers} layers, fp32 weights {mib(size)}")
    print(f"peak RSS, reference model in memory:      {mib(peaks['in_memory'])}")
    print(f"peak RSS, precomputed reference log-probs: {mib(peaks['precomputed'])}")
    print(f"difference:                                {mib(saving)}")
    print(f"difference / weights: {saving / size:.2f} (target >= 0.80: "
          f"{'met' if saving >= 0.8 * size else 'NOT met'})")


if __name__ == "__main__":
    main()
