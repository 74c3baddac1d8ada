"""Offline demo trajectories in which some rollouts succeed.

A random tiny model never solves a task, so the CPU demo of the SWEET-RL loop would have no
successful trajectory and hence no critic pairs. This module plays scripted dialogues through
the real :class:`~sweet_rl.environments.BackendEnv` — a scripted agent that asks one question
and then answers with the reference code (rollout 0), a wrong function (rollout 1) or the
reference code without asking (rollout 2) — with prompts chat-formatted by the given model's
tokenizer, so the file has exactly the layout of the original's offline data
(``colbench_code_offline_15k_llama8b.jsonl``). Grade it with ``evaluate_code.py --k 3``.

    python -m sweet_rl.data.offline_demo outputs/offline.jsonl --tokenizer outputs/tiny-llama
"""

from __future__ import annotations

import re
from typing import Optional

from sweet_rl.agents.base import Agent, AgentOutput
from sweet_rl.simulators.base import Simulator, SimulatorReply

ROLLOUTS = 3
QUESTION = "Thinking about edge cases first. OUTPUT: What should the function do with unusual inputs?"
HUMAN_REPLY = "Just follow the rules I described; I don't know more than that."


def _function_name(code: str) -> str:
    match = re.search(r"def\s+(\w+)\s*\(([^)]*)\)", code)
    return f"def {match.group(1)}({match.group(2)})" if match else "def solution(*args)"


class ScriptedAgent(Agent):
    """One dialogue's agent. Style 0 asks, then answers right; 1 asks, then answers wrong;
    2 answers right at once."""

    def __init__(self, tokenizer, style: int, answer: str):
        self.tokenizer, self.style, self.answer = tokenizer, style, answer

    def generate(self, conversations, seeds=None):
        from sweet_rl.hf_generation import format_chat

        outputs = []
        for messages in conversations:
            turn = sum(m["role"] == "assistant" for m in messages)
            if self.style == 2 or turn >= 1:
                text = f"I have enough to write it. OUTPUT: I WANT TO ANSWER:\n```python\n{self.answer}\n```"
            else:
                text = QUESTION
            outputs.append(AgentOutput(prompt=format_chat(self.tokenizer, messages), output=text))
        return outputs


class ScriptedHuman(Simulator):
    def reply_batch(self, conversations):
        return [SimulatorReply(text=HUMAN_REPLY) for _ in conversations]


def build_offline_trajectories(tokenizer, tasks, rollouts: int = ROLLOUTS):
    """Trajectories in simulate's row order (row ``i + j * num_tasks`` is rollout j of task i)."""
    from sweet_rl.environments import BackendEnv
    from sweet_rl.prompts import load_prompt
    from sweet_rl.rollout import run_dialogues

    agent_prompt, user_prompt = load_prompt(None, "agent"), load_prompt(None, "user")
    rows = [(j, task) for j in range(rollouts) for task in tasks]
    trajectories = []
    for j, task in rows:  # one dialogue at a time: each has its own scripted agent
        wrong = f"{_function_name(task.ground_truth)}:\n    return None"
        answer = wrong if j % 3 == 1 else task.ground_truth
        env = BackendEnv(task, agent_prompt, user_prompt)
        [trajectory] = run_dialogues([env], ScriptedAgent(tokenizer, j % 3, answer), ScriptedHuman())
        trajectories.append(trajectory)
    return trajectories


def main(output_path: str, tokenizer: Optional[str] = None, input_path: Optional[str] = None,
         rollouts: int = ROLLOUTS):
    """Write the scripted offline trajectories (unevaluated) to ``output_path``."""
    arguments = dict(locals())
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.factory import resolve_model
    from sweet_rl.hf_generation import load_tokenizer
    from sweet_rl.io import write_jsonl, write_sidecar

    tasks = load_tasks(input_path)
    trajectories = build_offline_trajectories(load_tokenizer(resolve_model(tokenizer)), tasks, rollouts)
    write_jsonl(output_path, trajectories)
    write_sidecar(output_path, arguments, "offline_demo")
    print(f"offline_demo: {len(trajectories)} scripted trajectories ({len(tasks)} tasks x {rollouts}) -> {output_path}")


if __name__ == "__main__":
    from sweet_rl.cli.common import run_cli

    run_cli(main)
