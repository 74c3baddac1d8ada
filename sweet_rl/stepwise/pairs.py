"""Per-turn DPO pairs from ranked candidates (the pair stage's logic, no models).

The draw is the original's, step for step, so that the same ranked file and seed give the
same pairs in the same order (a published number depends on which pairs are trained on):

* per turn the candidates are sorted by ``judge_result`` ascending with a stable sort (equal
  values keep candidate order; numpy's argsort, which the original used, is stable for the
  N <= 16 it saw). The LOW half is the first ``N // 2`` positions, the HIGH half the other
  ``N - N // 2`` -- with odd N the middle candidate is on the high (chosen) side;
* for each of ``num_pairs`` pairs: one ``rng.choice`` over the low half, then one over the
  high half (independent, with replacement); the one with the larger ``judge_result`` is
  chosen, and on a tie the high-half draw is chosen;
* one ``random.Random(seed)`` is walked over the whole file in order (turn by turn, pair by
  pair), then shuffles the full list of pairs.

Ours on top: a pair whose two texts are identical (common for short outputs) teaches nothing
and is dropped -- after the shuffle, so every other pair keeps the original's order. A turn
with fewer than two candidates gives no pair (the original failed on it).

Record layouts (keys in the original's order; what
:func:`sweet_rl.training.data.read_preference_pairs` reads):

* default: ``{"chosen": output + eos, "rejected": output + eos, "prompt": input}``;
* ``no_prompt``: ``{"chosen": input + output + eos, "rejected": input + output + eos}`` (the
  agent-DPO data of the recipe; the trainer takes the common token prefix as the prompt);
* SFT (``get_sft``, ours): ``{"prompt": input, "completion": best output + eos,
  "judge_result"}`` per turn -- TRL's prompt/completion layout. (The original wrote N copies
  of one random candidate as both chosen and rejected.)

``eos`` is the agent tokenizer's own end-of-turn token (``<|eot_id|>`` for Llama-3.1
Instruct): the sampled texts were decoded without it, and the trained sequence must end the
way the agent ends a turn.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Sequence, Tuple

from sweet_rl.records import StepSample

Drawn = Tuple[str, str, str]  # (input, chosen text, rejected text)


def ascending_order(judge: Sequence[float]) -> List[int]:
    """Candidate indices sorted by ``judge`` ascending; ties keep candidate order."""
    return sorted(range(len(judge)), key=lambda k: float(judge[k]))


def split_halves(judge: Sequence[float]) -> Tuple[List[int], List[int]]:
    """(low half, high half) of the candidate indices, in ascending ``judge`` order."""
    order = ascending_order(judge)
    middle = len(order) // 2
    return order[:middle], order[middle:]


def draw_pairs(judge: Sequence[float], num_pairs: int, rng: random.Random) -> List[Tuple[int, int]]:
    """``num_pairs`` (chosen, rejected) index pairs; empty (and no draw) when N < 2."""
    low, high = split_halves(judge)
    if not low:
        return []
    pairs = []
    for _ in range(int(num_pairs)):
        first = rng.choice(low)  # the draw order is the original's: low half, then high half
        second = rng.choice(high)
        if float(judge[first]) > float(judge[second]):
            pairs.append((first, second))
        else:  # the usual case, and a tie: the high-half draw is chosen
            pairs.append((second, first))
    return pairs


def draw_all(samples: Sequence[StepSample], num_pairs: int,
             rng: random.Random) -> Tuple[List[Drawn], int]:
    """Every turn's draws in file order, shuffled by the same ``rng``; identical texts dropped
    after the shuffle. Returns (kept draws, number dropped)."""
    drawn: List[Drawn] = []
    for sample in samples:
        outputs = sample.additional_outputs
        for chosen, rejected in draw_pairs(sample.judge_result, num_pairs, rng):
            drawn.append((sample.input, outputs[chosen], outputs[rejected]))
    rng.shuffle(drawn)
    kept = [d for d in drawn if d[1] != d[2]]
    return kept, len(drawn) - len(kept)


def pair_record(
    prompt: str, chosen: str, rejected: str, eos: str, no_prompt: bool
) -> Dict[str, str]:
    if no_prompt:
        return {"chosen": prompt + chosen + eos, "rejected": prompt + rejected + eos}
    return {"chosen": chosen + eos, "rejected": rejected + eos, "prompt": prompt}


def pair_records(samples: Sequence[StepSample], num_pairs: int, rng: random.Random, eos: str,
                 no_prompt: bool) -> Tuple[List[Dict[str, str]], int]:
    """(pair records of the whole file, number of identical-text pairs dropped)."""
    kept, dropped = draw_all(samples, num_pairs, rng)
    return [pair_record(p, c, r, eos, no_prompt) for p, c, r in kept], dropped


def sft_record(sample: StepSample, eos: str) -> Dict[str, Any]:
    """The best candidate of a turn as a prompt/completion SFT example."""
    judge = sample.judge_result
    best = max(range(len(judge)), key=lambda k: (float(judge[k]), -k))  # first of the best
    return {"prompt": sample.input, "completion": sample.additional_outputs[best] + eos,
            "judge_result": float(judge[best])}
