"""The miniature's two task families, side by side: what the recipes need to know of each.

* ``basic``: the four families of :mod:`sweet_rl.recipes.mini.tasks` (ask about every detail
  the request names, then copy the told values). Cloning the successful dialogues teaches the
  whole skill there, so it is the negative control, where rejection fine-tuning should win.
* ``followup``: :mod:`sweet_rl.recipes.mini.followup_tasks` (a detail only a follow-up
  question reveals, usual values that are right three times in ten, four turns), where credit
  over turns should decide.

The settings' ``family`` field (``FAMILY``) picks one; the warm start, the copy check, every
simulation and the Best-of-N curve read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from sweet_rl.recipes.mini.followup_tasks import MAX_TURNS


@dataclass(frozen=True)
class FamilySet:
    name: str
    styles: Tuple[str, ...]  # the scripted styles of its warm-start dialogues
    mix: str  # the default shares of those styles
    max_turns: int  # agent turns per dialogue (the environment's max_steps)
    told_style: str  # the style that asks everything: the copy check plays it
    splits: Tuple[str, ...]  # the task splits it can write


FAMILY_SETS: Dict[str, FamilySet] = {
    "basic": FamilySet("basic", ("asker", "guesser", "waster"),
                       "asker=0.35,guesser=0.3,waster=0.35", 10, "asker", ("train", "test")),
    # thorough dialogues rare enough that the warm agent seldom asks the right follow-up
    # (docs/mini_warm_start.md, "The followup family's warm start")
    "followup": FamilySet("followup", ("thorough", "skipper", "guesser", "waster"),
                          "thorough=0.35,skipper=0.3,guesser=0.2,waster=0.15", MAX_TURNS,
                          "thorough",
                          ("train", "valid", "test")),
}


def family_set(name: str) -> FamilySet:
    """The family set called ``name``; an unknown name is refused, naming the choices."""
    if name not in FAMILY_SETS:
        raise ValueError(f"--family (FAMILY) must be one of {', '.join(FAMILY_SETS)}, got "
                         f"{name!r}")
    return FAMILY_SETS[name]


def build_dialogues(name: str):
    """The family's builder of scripted dialogues (tokenizer, tasks, styles, ...)."""
    if family_set(name).name == "followup":
        from sweet_rl.recipes.mini.followup_dialogues import build_followup_trajectories

        return build_followup_trajectories
    from sweet_rl.recipes.mini.dialogues import build_mini_trajectories

    return build_mini_trajectories

