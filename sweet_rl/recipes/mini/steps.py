"""Matched gradient steps: how many optimizer updates a training makes, and the epochs that
make another training on other data make as many.

Rejection fine-tuning, multi-turn DPO and SWEET-RL's agent DPO train on different rows (the
successful dialogues, trajectory pairs, per-turn pairs), so equal epochs are unequal updates.
With ``match_steps`` the reproduction trains the two baselines for as many updates as
SWEET-RL's agent makes on the same offline data (``--max_epochs`` may be a fraction: the
trainer stops after ``ceil(epochs x updates per epoch)`` updates).
"""

from __future__ import annotations

import math

BATCH = 8  # every method's --train_batch_size (methods.TRAIN_FLAGS)


def rows_in(path: str, min_reward: float = None) -> int:
    """The rows of a JSONL file (those with a reward of at least ``min_reward`` if given); a
    bad line is named by the project's reader."""
    from sweet_rl.io import read_jsonl

    return sum(1 for row in read_jsonl(path)
               if min_reward is None or row.get("reward", 0) >= min_reward)


def updates_per_epoch(rows: int, micro: int = 1) -> int:
    """Optimizer updates in one pass over ``rows`` (micro-batches of ``micro`` accumulated
    up to BATCH rows; at least one)."""
    micro_batches = math.ceil(rows / micro)
    return max(1, math.ceil(micro_batches / max(1, BATCH // micro)))


def updates(rows: int, epochs: float, micro: int = 1) -> int:
    """The updates of ``epochs`` passes over ``rows``."""
    return math.ceil(epochs * updates_per_epoch(rows, micro))


def epochs_for(rows: int, target: int, micro: int = 1) -> float:
    """The ``--max_epochs`` that makes exactly ``target`` updates over ``rows``: half an update
    short of ``target``, so that rounding up lands on it."""
    if target < 1:
        raise ValueError(f"a matched training needs at least one update, got {target}")
    return (target - 0.5) / updates_per_epoch(rows, micro)
