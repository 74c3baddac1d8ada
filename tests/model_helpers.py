"""Test helpers: variants of the tiny model and a small offline trajectory file."""

from __future__ import annotations

import json
from typing import Sequence, Tuple


def loud_stop_model(model_dir: str, target: str, norm: float = 8.0,
                    direction_seed: int = 0) -> str:
    """A copy of ``model_dir`` whose <|eot_id|> output row is a random direction (drawn with
    ``direction_seed``) of norm ``norm``: at some positions eot wins and a sample stops,
    elsewhere it runs on, so one batch holds both stopped and cut candidates (for the tiny
    model, at about a quarter of the positions with the defaults)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    draw = torch.Generator().manual_seed(direction_seed)
    direction = torch.randn(model.config.hidden_size, generator=draw)
    with torch.no_grad():
        model.lm_head.weight[tokenizer.eos_token_id] = norm * direction / direction.norm()
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


TASKS = (("add two numbers", 1.0), ("sort a list", 0.0))
TURNS = (("OUTPUT: ints?", "yes"), ("I WANT TO ANSWER: def f", None))


def write_offline(path, tokenizer, tasks: Sequence[Tuple[str, float]] = TASKS) -> str:
    """Evaluated trajectories, one per (task, reward), with two assistant turns each. Entries
    are stored with keys in an unusual order and an extra key, to show they are copied as
    stored."""
    rows = []
    for task, reward in tasks:
        history = [{"content": task, "role": "user"}]
        for reply, user in TURNS:
            prompt = tokenizer.apply_chat_template(
                [{"role": m["role"], "content": m["content"]} for m in history],
                tokenize=False, add_generation_prompt=True)
            history.append({"output": reply, "role": "assistant", "content": reply,
                            "input": prompt, "meta": {"turn": len(history)}})
            if user:
                history.append({"role": "user", "content": user})
        rows.append({"task": {"problem_description": task, "ground_truth": "def f(): pass"},
                     "dialogue_history": history, "answer": "def f", "reward": reward})
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)
