"""Scripted agent dialogues of mixed quality on the miniature ColBench tasks.

Warm-start data for a tiny agent: for each task, the agent's turns in the exact protocol the
environments read (``... OUTPUT: message``; the last turn ``OUTPUT: I WANT TO ANSWER:`` and
the code in a python fence, :func:`sweet_rl.data.offline_demo.code_answer`). Three styles:

* ``asker``: asks about each hidden detail by its keyword, one per turn, then answers with the
  reference itself — every test passes;
* ``guesser``: answers at once with the default guesses — every detail wrong (a hidden value
  is never the guess), so it fails at least three tests per detail;
* ``waster``: asks two questions that name no detail (the human's unhelpful reply), then asks
  about the first detail only and answers with it right and the others guessed — partly
  right, never all ten tests.

:func:`build_mini_trajectories` plays them through the real backend environment with the
scripted human (:mod:`sweet_rl.simulators.scripted_simulator`), with the machinery of
:mod:`sweet_rl.data.offline_demo`, so the rows have the layout of ``simulate_interactions.py``.
"""

from __future__ import annotations

import zlib
from typing import List, Optional, Sequence

from sweet_rl.recipes.mini.tasks import FAMILY_BY_NAME, guess_values
from sweet_rl.data.offline_demo import code_answer
from sweet_rl.records import Task

STYLES = ("asker", "guesser", "waster")
# Questions that name no detail keyword of any family (a test checks it): wasted turns.
IRRELEVANT_QUESTIONS = (
    "Should the function check the type of its inputs?",
    "Do you want comments in the code?",
    "Should I add a docstring?",
    "Is speed important for this function?",
    "Can the inputs be negative?",
)
WASTED_TURNS = 2


def question(keyword: str) -> str:
    """The asker's turn for one detail: a short thought, then the question naming it."""
    return f"I still need to know the {keyword}. OUTPUT: What is the {keyword}?"


def wasted_question(text: str) -> str:
    return f"Let me check something first. OUTPUT: {text}"


def answer(task: Task, known: Sequence[str]) -> str:
    """The final turn: the function with the details named in ``known`` right, others guessed
    (all known: exactly the reference)."""
    family = FAMILY_BY_NAME[task.extra["mini_family"]]
    return code_answer(family.code(guess_values(task, known)))


def agent_turns(task: Task, style: str) -> List[str]:
    """The agent's raw messages, turn by turn, for one dialogue of ``style``."""
    details = FAMILY_BY_NAME[task.extra["mini_family"]].details
    if style == "asker":
        return [question(d.keyword) for d in details] + [answer(task, [d.name for d in details])]
    if style == "guesser":
        return [answer(task, ())]
    if style == "waster":
        # which irrelevant questions: fixed per task (a stable hash), varied across tasks
        first = zlib.crc32(task.ground_truth.encode()) % len(IRRELEVANT_QUESTIONS)
        wasted = [wasted_question(IRRELEVANT_QUESTIONS[(first + i) % len(IRRELEVANT_QUESTIONS)])
                  for i in range(WASTED_TURNS)]
        return wasted + [question(details[0].keyword), answer(task, [details[0].name])]
    raise ValueError(f"unknown style {style!r}; choose from {STYLES}")


def build_mini_trajectories(tokenizer, tasks: List[Task], styles: Sequence[str] = STYLES,
                            env_kwargs: Optional[dict] = None, agent_prompt: Optional[str] = None):
    """One trajectory per (task, style) in simulate's row order (:mod:`sweet_rl.layout`):
    rollout j of every task is ``styles[j]``. ``tokenizer`` chat-formats each turn's input."""
    from sweet_rl.data.offline_demo import play_scripts
    from sweet_rl.layout import lay_out, rollout_of
    from sweet_rl.simulators.scripted_simulator import ScriptedSimulator

    rows = lay_out(tasks, len(styles))
    scripts = [agent_turns(task, styles[rollout_of(row, len(tasks))])
               for row, task in enumerate(rows)]
    return play_scripts(tokenizer, rows, scripts, ScriptedSimulator(), "code", env_kwargs,
                        agent_prompt)
