"""Recall drills: warm-start rows that teach a tiny agent to write told values into code.

An agent that asked about every detail still fails unless it writes the values it was told,
and a tiny model trained from scratch on the dialogues alone does not learn that: each
dialogue holds two or three such copies among hundreds of tokens, and after 3000 updates it
still wrote each value as a draw from the detail's options (docs/mini_warm_start.md). A
drill is dense in exactly that skill: the user tells 4-9 details of any families in the
scripted human's own sentences, and the agent writes each as the reference does, the
sentence as a comment and then the constant, in a shuffled order::

    user:      The fee runs 3 per day. The rounding goes 'up'. A pass needs 65 or more. ...
    assistant: OUTPUT: ```python
                   # A pass needs 65 or more.
                   THRESHOLD = 65
                   ...```

Drills are single-turn rows in the trajectory layout (reward 1.0, no tests: they are never
graded), written beside the dialogues and given to the same SFT stage. In a plain PyTorch
loop with drills in half of every batch the held-out dialogues' value accuracy went from
0.31 to 0.67 between updates 500 and 1000; without them it stayed near 0.3-0.4.
"""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence

from sweet_rl.recipes.mini.tasks import select_families

REQUEST = "Write each of these as a Python constant, under a comment that says it:"
MIN_TOLD, MAX_TOLD = 4, 9  # 9: the distinct constant names of all families


def details_by_name(families: Optional[Sequence[str]] = None) -> Dict[str, List]:
    """The details of ``families`` (all by default) under their constant names: a drill
    tells at most one detail of each name."""
    by_name: Dict[str, List] = {}
    for family in select_families(families):
        for detail in family.details:
            by_name.setdefault(detail.name, []).append(detail)
    return by_name


def drill(rng: random.Random, families: Optional[Sequence[str]] = None,
          pools: Optional[Dict[str, List]] = None):
    """(the user's message, the agent's message) of one drill, on the details of ``families``
    (all by default), or on ``pools`` (constant name -> details, as :func:`details_by_name`
    gives them) when given."""
    # one detail per constant name: RATE and ROUNDING occur in two families, and a drill that
    # told two rates or two roundings would ask for contradicting constants
    by_name = details_by_name(families) if pools is None else pools
    details = [(d, rng.choice(d.options)) for d in (rng.choice(by_name[n]) for n in by_name)]
    rng.shuffle(details)
    # a single family has fewer names than MIN_TOLD: then every drill tells all of them
    told = details[:rng.randint(min(MIN_TOLD, len(details)), min(MAX_TOLD, len(details)))]
    written = told[:]
    rng.shuffle(written)  # the order told is not the order written: the agent must look
    # indented as in a function: unindented drills did not carry over to the answers (greedy
    # copy accuracy 16/88 against 66/88, docs/mini_warm_start.md runs w8 and w9)
    lines = [f"    # {d.says(v)}\n    {d.name} = {v!r}" for d, v in written]
    message = REQUEST + " " + " ".join(d.says(v) for d, v in told)
    return message, "OUTPUT: ```python\n" + "\n".join(lines) + "\n```"


def build_drills(tokenizer, n: int, seed: int = 0, agent_prompt: str = None,
                 families: Optional[Sequence[str]] = None,
                 pools: Optional[Dict[str, List]] = None) -> List:
    """``n`` drill rows (Trajectory) on the details of ``families`` (all by default) or of
    ``pools`` (:func:`drill`), the
    agent's input chat-formatted with ``tokenizer`` after the same system message as the
    dialogues."""
    from sweet_rl.models.hf_generation import format_chat
    from sweet_rl.prompts import load_prompt
    from sweet_rl.records import Task, Trajectory, Turn

    system = agent_prompt if agent_prompt is not None else load_prompt(None, "agent")
    rng = random.Random(f"mini-drills:{seed}")
    rows = []
    for _ in range(int(n)):
        message, output = drill(rng, families, pools)
        chat = [{"role": "system", "content": system}, {"role": "user", "content": message}]
        rows.append(Trajectory(
            task=Task(problem_description=message, ground_truth=output, test_cases={},
                      extra={"mini_style": "drill"}),
            dialogue_history=[Turn(role="user", content=message),
                              Turn(role="assistant", content=output,
                                   input=format_chat(tokenizer, chat), output=output)],
            answer=output, reward=1.0))
    return rows
