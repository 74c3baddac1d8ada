"""Offline demo trajectories in which some rollouts succeed.

A random tiny model never solves a task, so the CPU demo of the SWEET-RL loop would have no
successful trajectory and hence no critic pairs. This module plays scripted dialogues through
the real :class:`~sweet_rl.environments.BackendEnv` — a scripted agent that asks one question
and then answers with the reference code (rollout 0), a wrong function (rollout 1) or the
reference code without asking (rollout 2) — with prompts chat-formatted by the given model's
tokenizer, so the file has exactly the layout of the original's offline data
(``colbench_code_offline_15k_llama8b.jsonl``). Grade it with ``evaluate_code.py --k 3``.
The command that writes the file is :mod:`sweet_rl.cli.offline_demo`:

    python -m sweet_rl.cli.offline_demo outputs/offline.jsonl --tokenizer outputs/tiny-llama

With ``--task_type html`` the same three styles play the bundled sample frontend tasks through
the real :class:`~sweet_rl.environments.DesignEnv` (pages rendered in headless Chromium): the
scripted agent shows a dark draft page and then the reference page (rollout 0), only the draft
(rollout 1), or the reference page at once (rollout 2). Score it with
``evaluate_html.py --k 3``: rollouts 0 and 2 match the reference exactly, so the critic gets
pairs whatever CLIP weights are used.
"""

from __future__ import annotations

import re
from typing import List, Optional

from sweet_rl.agents.base import Agent
from sweet_rl.simulators.base import Simulator
from sweet_rl.types import AgentOutput, SimulatorReply

ROLLOUTS = 3
QUESTION = (
    "Thinking about edge cases first. OUTPUT: What should the function do with unusual inputs?"
)
HUMAN_REPLY = "Just follow the rules I described; I don't know more than that."
DESIGN_QUESTION = (
    "Let me start from a rough sketch. OUTPUT: Is this close to the layout you have in mind?"
)
DRAFT_PAGE = ('<html><body style="background:#1f2937;color:#fff;font:32px sans-serif;padding:40px">'
              "<h1>Draft</h1><p>A first sketch.</p></body></html>")
ANSWER_INTRO = "I have enough to write it. OUTPUT: I WANT TO ANSWER:"


def _function_name(code: str) -> str:
    match = re.search(r"def\s+(\w+)\s*\(([^)]*)\)", code)
    return f"def {match.group(1)}({match.group(2)})" if match else "def solution(*args)"


def code_answer(code: str) -> str:
    """The agent's final backend message: the answer marker, then the code in a fence."""
    return f"{ANSWER_INTRO}\n```python\n{code}\n```"


def script(task_type: str, style: int, truth: str) -> List[str]:
    """The agent's messages, turn by turn. Style 0 asks, then answers right; 1 asks, then
    answers wrong; 2 answers right at once."""
    if task_type == "html":
        question, wrong = f"{DESIGN_QUESTION}\n{DRAFT_PAGE}", DRAFT_PAGE
    else:
        question, wrong = QUESTION, f"{_function_name(truth)}:\n    return None"
    chosen = wrong if style == 1 else truth
    final = (f"{ANSWER_INTRO} Here is the page.\n{chosen}" if task_type == "html"
             else code_answer(chosen))
    return [final] if style == 2 else [question if style == 0 else QUESTION, final]


class ScriptedAgent(Agent):
    """One dialogue's agent: says the messages of ``turns`` in order."""

    def __init__(self, tokenizer, turns: List[str]):
        self.tokenizer, self.turns = tokenizer, turns

    def generate(self, conversations, seeds=None, keys=None):
        from sweet_rl.models.hf_generation import format_chat

        outputs = []
        for messages in conversations:
            turn = sum(m["role"] == "assistant" for m in messages)
            text = self.turns[min(turn, len(self.turns) - 1)]
            outputs.append(AgentOutput(prompt=format_chat(self.tokenizer, messages), output=text))
        return outputs


class ScriptedHuman(Simulator):
    def reply_batch(self, conversations, keys=None):
        return [SimulatorReply(text=HUMAN_REPLY) for _ in conversations]


def build_offline_trajectories(tokenizer, tasks, rollouts: int = ROLLOUTS, task_type: str = "code",
                               env_kwargs: Optional[dict] = None):
    """Trajectories in simulate's row order (:mod:`sweet_rl.layout`)."""
    from sweet_rl.layout import lay_out, rollout_of

    rows = lay_out(tasks, rollouts)
    scripts = [script(task_type, rollout_of(row, len(tasks)) % 3, task.ground_truth)
               for row, task in enumerate(rows)]
    return play_scripts(tokenizer, rows, scripts, ScriptedHuman(), task_type, env_kwargs)


def play_scripts(tokenizer, rows, scripts: List[List[str]], human: Simulator,
                 task_type: str = "code", env_kwargs: Optional[dict] = None,
                 agent_prompt: Optional[str] = None):
    """One trajectory per row: ``scripts[i]`` (the agent's messages) played on ``rows[i]``
    through the real environment, ``human`` answering, with the bundled prompts (or the
    agent's system message ``agent_prompt``, a text)."""
    from sweet_rl.environments import make_env
    from sweet_rl.prompts import load_prompt
    from sweet_rl.rollouts.lockstep import run_dialogues

    if agent_prompt is None:
        agent_prompt = load_prompt(None, "agent", task_type)
    user_prompt = load_prompt(None, "user", task_type)
    trajectories = []
    # one dialogue at a time: each has its own scripted agent
    for task, turns in zip(rows, scripts):
        env = make_env(task_type, task, agent_prompt, user_prompt, **(env_kwargs or {}))
        [trajectory] = run_dialogues([env], ScriptedAgent(tokenizer, turns), human)
        trajectories.append(trajectory)
    return trajectories
