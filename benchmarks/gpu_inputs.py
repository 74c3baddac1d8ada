#!/usr/bin/env python
"""The inputs of the GPU check's timed steps (benchmarks/gpu_check.py), built locally.

    python benchmarks/gpu_inputs.py OUT --size 1b --device cuda     # the check on a GPU
    python benchmarks/gpu_inputs.py OUT --size tiny --device cpu    # its CPU dry run

Writes to OUT:
  model/          a random Llama-architecture model from a config (no download), with the
                  project's local tokenizer (sweet_rl/models/tiny_model.py). ``1b``: Llama-3.2-1B's
                  layout (hidden 2048, 16 layers, 32 heads, 8 key-value heads, MLP 8192),
                  about 0.98B parameters; its vocabulary is the local tokenizer's 1K tokens,
                  not Llama-3's 128K, so its output layer costs far less than a real 1B's;
  offline.jsonl   the miniature's scripted dialogues (sweet_rl/recipes/mini/dialogues.py: an
                  asker that passes, a guesser and a waster that fail, per task) in the layout
                  of simulate_interactions.py with a reward each: the offline records the
                  sample stage reads;
  critic_pairs.jsonl  per task, the asker's whole dialogue over each other style's, with the
                  reference in front (what evaluate_code.py writes for the critic);
  agent_pairs.jsonl   per asker turn, its reply over the guesser's first reply to the same
                  dialogue so far (pairs in generate_random_pairs_from_ranks.py --no_prompt's
                  form: input + reply + end-of-turn);
and prints one JSON line of facts (parameters, counts, seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# LlamaConfig fields per size; "tiny" is the project's tiny model (sweet_rl/models/tiny_model.py)
SIZES = {
    "1b": dict(hidden_size=2048, num_layers=16, intermediate_size=8192,
               num_attention_heads=32, num_key_value_heads=8),
    "tiny": dict(hidden_size=64, num_layers=2),
}


def build_model(out: str, size: str, device: str) -> dict:
    import torch

    from sweet_rl.models.tiny_model import build_tiny_model

    path = build_tiny_model(os.path.join(out, "model"), seed=0, device=device,
                            dtype="bfloat16", tie_embeddings=True, **SIZES[size])
    from safetensors import safe_open

    with safe_open(os.path.join(path, "model.safetensors"), "pt") as handle:
        parameters = sum(_numel(handle.get_slice(k).get_shape()) for k in handle.keys())
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"model": path, "parameters": parameters}


def _numel(shape) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def write_data(out: str, model: str, tasks: int, agent_pairs: int = 0) -> dict:
    from sweet_rl.recipes.mini.dialogues import STYLES, build_mini_trajectories
    from sweet_rl.recipes.mini.tasks import generate_tasks
    from sweet_rl.evaluation.preferences import pair_texts
    from sweet_rl.io import write_jsonl
    from sweet_rl.layout import rollout_of, row_of
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.stepwise.pairs import pair_record

    tokenizer = load_tokenizer(model)
    asker, guesser = STYLES.index("asker"), STYLES.index("guesser")
    dialogues = build_mini_trajectories(tokenizer, generate_tasks(tasks, 0, "train"), STYLES)
    # the sample stage reads graded records; no timed step reads the reward itself, so the
    # askers get 1.0 and the others 0.0 here instead of a run of the grader
    dialogues = [dataclasses.replace(d, reward=float(rollout_of(row, tasks) == asker))
                 for row, d in enumerate(dialogues)]
    write_jsonl(os.path.join(out, "offline.jsonl"), dialogues)
    critic, agent = [], []
    for task in range(tasks):
        best = dialogues[row_of(task, asker, tasks)]
        for style in range(len(STYLES)):
            if style != asker:
                critic.append(pair_texts(best, dialogues[row_of(task, style, tasks)], True))
        guess = dialogues[row_of(task, guesser, tasks)].assistant_turns[0].output
        agent += [pair_record(turn.input, turn.output, guess, tokenizer.eos_token, True)
                  for turn in best.assistant_turns]
    if agent_pairs:  # as many training steps as the critic's: the check's budget is minutes
        agent = agent[:agent_pairs]
    write_jsonl(os.path.join(out, "critic_pairs.jsonl"), critic)
    write_jsonl(os.path.join(out, "agent_pairs.jsonl"), agent)

    def tokens(pairs):
        return [len(tokenizer(p[side], add_special_tokens=False)["input_ids"])
                for p in pairs for side in ("chosen", "rejected")]

    critic_tokens, agent_tokens = tokens(critic), tokens(agent)
    return {"dialogues": len(dialogues), "critic_pairs": len(critic), "agent_pairs": len(agent),
            "critic_tokens_mean": round(sum(critic_tokens) / len(critic_tokens)),
            "critic_tokens_max": max(critic_tokens),
            "agent_tokens_mean": round(sum(agent_tokens) / len(agent_tokens)),
            "agent_tokens_max": max(agent_tokens)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--size", choices=sorted(SIZES), default="1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tasks", type=int, default=32,
                        help="miniature tasks (3 dialogues, 2 critic pairs each)")
    parser.add_argument("--agent_pairs", type=int, default=0,
                        help="keep only the first N of the agent's per-turn pairs (0: all)")
    args = parser.parse_args()
    start = time.time()
    os.makedirs(args.out, exist_ok=True)
    facts = build_model(args.out, args.size, args.device)
    facts["build_seconds"] = round(time.time() - start, 1)
    facts.update(write_data(args.out, facts["model"], args.tasks, args.agent_pairs))
    facts["seconds"] = round(time.time() - start, 1)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
