"""Warm-start data for a tiny agent on the miniature ColBench: one scripted dialogue per task,
its style drawn from a mix.

The warm start is behaviour cloning of a *mixed* population, not of the best agent: each
train task gets one dialogue, ``asker``, ``guesser`` or ``waster``
(:mod:`sweet_rl.recipes.mini.dialogues`), in the proportions of ``mix``. A model fine-tuned on
all of them (the SFT stage with ``--min_reward 0``) learns the protocol from every row but
only sometimes plays the asker, so zero-shot it succeeds sometimes, not always: the room that
SWEET-RL must then improve in. Cloning only the successful rows (the SFT stage's default,
``--min_reward 1``) would give an agent that already asks every time.

The mix is exact, not sampled: ``n`` tasks get the largest-remainder rounding of
``n * share`` per style, then the order is shuffled with ``seed``, so a small run still has
every style in it.
"""

from __future__ import annotations

import random
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from sweet_rl.recipes.mini.dialogues import STYLES, build_mini_trajectories
from sweet_rl.records import Task

# The share of askers is meant to set how often the warm agent succeeds zero-shot; the runs
# so far (docs/mini_warm_start.md) have not yet reached the 15-35% aimed at, so this is a
# starting point, not a tuned value.
DEFAULT_MIX: Dict[str, float] = {"asker": 0.4, "guesser": 0.3, "waster": 0.3}


def parse_mix(text: str, styles: Sequence[str] = STYLES) -> Dict[str, float]:
    """``"asker=0.4,guesser=0.3,waster=0.3"`` (shares need not sum to 1) -> normalised; every
    name must be one of ``styles`` (the family's styles: the basic ones by default)."""
    mix: Dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        style, _, share = part.partition("=")
        style = style.strip()
        if style not in styles:
            raise ValueError(f"unknown style {style!r} in mix {text!r}; choose from "
                             f"{tuple(styles)}")
        mix[style] = float(share)
    return normalise(mix)


def normalise(mix: Mapping[str, float]) -> Dict[str, float]:
    if any(share < 0 for share in mix.values()) or sum(mix.values()) <= 0:
        raise ValueError(f"a mix needs non-negative shares with a positive sum, got {mix}")
    total = sum(mix.values())
    return {style: share / total for style, share in mix.items() if share > 0}


def assign_styles(n: int, mix: Mapping[str, float], seed: int = 0,
                  order: Sequence[str] = STYLES) -> List[str]:
    """``n`` styles in the proportions of ``mix`` (largest remainder), shuffled by ``seed``;
    ``order`` is the family's list of styles (it breaks ties and sets the order shuffled)."""
    mix = normalise(mix)
    exact = {style: n * share for style, share in mix.items()}
    counts = {style: int(value) for style, value in exact.items()}
    # the leftover places go to the largest remainders (ties: the family's order of styles)
    by_remainder = sorted(mix, key=lambda s: (counts[s] - exact[s], list(order).index(s)))
    for style in by_remainder[:n - sum(counts.values())]:
        counts[style] += 1
    styles = [style for style in order if style in counts for _ in range(counts[style])]
    random.Random(f"mini-warm:{seed}").shuffle(styles)
    return styles


def build_warm_start_trajectories(tokenizer, tasks: List[Task], mix: Mapping[str, float],
                                  seed: int = 0, agent_prompt: Optional[str] = None,
                                  order: Sequence[str] = STYLES,
                                  build: Callable = build_mini_trajectories):
    """One scripted trajectory per task, in task order, with the style ``assign_styles``
    gives it; played through the real backend env with the scripted human (and the agent
    system message ``agent_prompt``, a text; the bundled one by default). ``order`` and
    ``build`` are the family's styles and dialogue builder (the basic family's by default)."""
    styles = assign_styles(len(tasks), mix, seed, order)
    rows: List = [None] * len(tasks)
    for style in dict.fromkeys(styles):
        # one batch per style: build_mini_trajectories plays every task with every style given
        where = [i for i, s in enumerate(styles) if s == style]
        played = build(tokenizer, [tasks[i] for i in where], (style,),
                       agent_prompt=agent_prompt)
        for i, trajectory in zip(where, played):
            rows[i] = trajectory
    return rows, styles
