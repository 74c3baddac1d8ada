"""Per-turn DPO pairs from ranked candidates (the pair stage's logic, no models).

Per turn the N candidates are sorted by ``judge_result`` (best first, ties in candidate
order). The top half is the first ``N // 2``, the bottom half the rest, so with odd N the
middle candidate counts as bottom; a turn with fewer than two candidates gives no pair.
Each of the ``num_pairs`` pairs draws its chosen from the top half and its rejected from the
bottom half, independently and with replacement, from one ``random.Random(seed)`` walked in
file order -- so a seed fixes the whole file. A draw whose two texts are identical (common for
short outputs) teaches nothing and is skipped.

Record layouts (what :func:`sweet_rl.training.data.read_preference_pairs` reads):

* default: ``{"prompt": input, "chosen": output + eos, "rejected": output + eos}`` -- the
  loss covers the response after the prompt;
* ``no_prompt``: ``{"chosen": input + output + eos, "rejected": input + output + eos}`` (the
  original's agent-DPO data; the trainer takes the common token prefix as the prompt);
* SFT (``get_sft``): ``{"prompt": input, "completion": best output + eos}`` per turn -- the
  prompt/completion layout of TRL's SFT data, plus ``"judge_result"`` of that candidate.

``eos`` is the agent tokenizer's own end-of-turn token (``<|eot_id|>`` for Llama-3.1
Instruct): the sampled texts were decoded without it, and the trained sequence must end the
way the agent ends a turn.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Sequence, Tuple


def split_halves(judge: Sequence[float]) -> Tuple[List[int], List[int]]:
    """Candidate indices of the top and bottom halves by ``judge`` (descending, stable)."""
    order = sorted(range(len(judge)), key=lambda k: -float(judge[k]))
    middle = len(order) // 2
    return order[:middle], order[middle:]


def draw_pairs(judge: Sequence[float], num_pairs: int, rng: random.Random) -> List[Tuple[int, int]]:
    """``num_pairs`` (chosen, rejected) index pairs; empty when N < 2."""
    top, bottom = split_halves(judge)
    if not top or not bottom:
        return []
    return [(rng.choice(top), rng.choice(bottom)) for _ in range(int(num_pairs))]


def pair_record(prompt: str, chosen: str, rejected: str, eos: str, no_prompt: bool) -> Dict[str, str]:
    if no_prompt:
        return {"chosen": prompt + chosen + eos, "rejected": prompt + rejected + eos}
    return {"prompt": prompt, "chosen": chosen + eos, "rejected": rejected + eos}


def turn_pairs(sample: Dict[str, Any], num_pairs: int, rng: random.Random, eos: str,
               no_prompt: bool) -> Tuple[List[Dict[str, str]], int]:
    """(pair records, number of draws skipped because both sides were the same text)."""
    outputs, judge = sample["additional_outputs"], sample["judge_result"]
    records, skipped = [], 0
    for c, r in draw_pairs(judge, num_pairs, rng):
        if outputs[c] == outputs[r]:
            skipped += 1
            continue
        records.append(pair_record(sample["input"], outputs[c], outputs[r], eos, no_prompt))
    return records, skipped


def sft_record(sample: Dict[str, Any], eos: str) -> Dict[str, Any]:
    """The best candidate of a turn as a prompt/completion SFT example."""
    judge = sample["judge_result"]
    best = max(range(len(judge)), key=lambda k: (float(judge[k]), -k))  # first of the best
    return {"prompt": sample["input"], "completion": sample["additional_outputs"][best] + eos,
            "judge_result": float(judge[best])}
