"""Scripted agent dialogues of mixed quality on the ``followup`` family
(:mod:`sweet_rl.recipes.mini.followup_tasks`), and its recall drills.

Four styles, in the protocol the environments read (as :mod:`sweet_rl.recipes.mini.dialogues`):

* ``thorough``: asks the postage, then the surcharge, then the follow-up question that names
  the zone the human just told ("What does zone 3 add?"), then answers with the reference:
  every test passes;
* ``skipper``: asks the postage and the surcharge, then answers with the usual amount: a near
  miss (one detail wrong) unless the amount happens to be the usual one;
* ``guesser``: answers at once with the usual values: passes only when all three are usual;
* ``waster``: asks a question that names no detail, then the postage and the surcharge, and
  must answer at the fourth and last turn with the usual amount.

So at the turn after the surcharge is told (the critical turn) the follow-up question is as
common in the warm start as thorough dialogues are among thorough and skipper ones: the mix
(:mod:`sweet_rl.recipes.mini.styles`) sets how rare it is in the warm agent's samples.
"""

from __future__ import annotations

import zlib
from typing import List, Optional, Sequence

from sweet_rl.recipes.mini.dialogues import IRRELEVANT_QUESTIONS, question, wasted_question
from sweet_rl.recipes.mini.followup_tasks import (DETAILS, MAX_TURNS, ZONES, amount_detail,
                                               answer_code, zone_of)
from sweet_rl.data.offline_demo import code_answer
from sweet_rl.records import Task

STYLES = ("thorough", "skipper", "guesser", "waster")
# what each style was told before it answers (its answer writes the usual value for the rest)
TOLD = {"thorough": ("POSTAGE", "SURCHARGE", "AMOUNT"), "skipper": ("POSTAGE", "SURCHARGE"),
        "guesser": (), "waster": ("POSTAGE", "SURCHARGE")}


def follow_up(zone: int) -> str:
    """The follow-up question for ``zone``: it names the zone, the amount's keyword."""
    return f"I still need to know what it adds. OUTPUT: What does zone {zone} add?"


def agent_turns(task: Task, style: str) -> List[str]:
    """The agent's raw messages, turn by turn, for one dialogue of ``style``."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; choose from {STYLES}")
    turns = []
    if style == "waster":  # which irrelevant question: fixed per task, varied across tasks
        pick = zlib.crc32(task.ground_truth.encode()) % len(IRRELEVANT_QUESTIONS)
        turns.append(wasted_question(IRRELEVANT_QUESTIONS[pick]))
    if style != "guesser":
        turns += [question("postage"), question("surcharge")]
    if style == "thorough":
        turns.append(follow_up(zone_of(task)))
    return turns + [code_answer(answer_code(task, TOLD[style]))]


def build_followup_trajectories(tokenizer, tasks: List[Task], styles: Sequence[str] = STYLES,
                                env_kwargs: Optional[dict] = None,
                                agent_prompt: Optional[str] = None):
    """One trajectory per (task, style) in simulate's row order, rollout j of every task
    ``styles[j]``, played through the real backend env with the scripted human and the
    family's turn limit."""
    from sweet_rl.data.offline_demo import play_scripts
    from sweet_rl.layout import lay_out, rollout_of
    from sweet_rl.simulators.scripted_simulator import ScriptedSimulator

    rows = lay_out(tasks, len(styles))
    scripts = [agent_turns(task, styles[rollout_of(row, len(tasks))])
               for row, task in enumerate(rows)]
    return play_scripts(tokenizer, rows, scripts, ScriptedSimulator(), "code",
                        {"max_steps": MAX_TURNS, **(env_kwargs or {})}, agent_prompt)


def drill_details():
    """The detail pools the family's recall drills draw from, by constant name: the basic
    families' numbers (the copy is learnt from many names, not three; their strings are left
    out, as the family has none) and this family's, the amount under any zone."""
    from sweet_rl.recipes.mini.drills import details_by_name

    pools = {name: details for name, details in details_by_name(None).items()
             if all(isinstance(v, int) for d in details for v in d.options)}
    pools.update({"POSTAGE": [DETAILS[0]], "SURCHARGE": [DETAILS[1]],
                  "AMOUNT": [amount_detail(zone) for zone in ZONES]})
    return pools


def build_followup_drills(tokenizer, n: int, seed: int = 0, agent_prompt: str = None):
    """``n`` recall drill rows over :func:`drill_details` (:mod:`sweet_rl.recipes.mini.drills`)."""
    from sweet_rl.recipes.mini.drills import build_drills

    return build_drills(tokenizer, n, seed, agent_prompt, pools=drill_details())
