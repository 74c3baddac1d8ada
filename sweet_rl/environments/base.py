"""A collaborative dialogue between an agent and a simulated human, one task at a time.

The environment owns the dialogue state and the protocol; it does not call models itself.
:mod:`sweet_rl.rollout` asks every running environment for the agent's and the simulator's
inputs, sends them to the models in batches, and feeds the replies back — so one batched
generate call serves all dialogues that are still running.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from sweet_rl.environments.protocol import (MAX_TURNS, ParsedTurn, dialogue_ends,
                                            parse_agent_output)
from sweet_rl.prompts import fill_template
from sweet_rl.records import Task, Trajectory, Turn
from sweet_rl.simulators.base import Conversation, SimulatorReply


def render_history(turns: List[Turn]) -> str:
    """Dialogue as plain text for prompts that take ``{dialogue_history}``."""
    names = {"user": "Human", "assistant": "Assistant"}
    return "\n\n".join(f"{names.get(t.role, t.role)}: {t.content}" for t in turns)


class CollaborationEnv:
    """Turn bookkeeping shared by the backend and frontend environments."""

    reply_chars: int = 400  # the simulated human's replies are cut to this many characters

    def __init__(self, task: Task, agent_prompt: str, user_prompt: str,
                 max_steps: int = MAX_TURNS, reply_chars: Optional[int] = None):
        self.task = task
        self.agent_prompt = agent_prompt
        self.user_prompt = user_prompt
        self.max_steps = max_steps
        if reply_chars is not None:
            self.reply_chars = reply_chars
        self.reset()

    # -- state ---------------------------------------------------------------------------
    def reset(self) -> List[Turn]:
        self.history: List[Turn] = [Turn(role="user", content=self.task.problem_description)]
        self.steps = 0
        self.done = False
        self.answer = ""
        self.error: Optional[str] = None
        return self.history

    def prompt_values(self) -> Dict[str, str]:
        return {"problem_description": self.task.problem_description,
                "hidden_information": self.task.hidden_information,
                "dialogue_history": render_history(self.history)}

    # -- agent side ----------------------------------------------------------------------
    def agent_messages(self) -> List[Dict[str, str]]:
        """What the agent sees: its instructions with the request, then the dialogue so far.

        With a template that has ``{dialogue_history}`` the whole dialogue is one message;
        otherwise the first user message is the filled template and the later turns follow
        as chat messages (the layout the critic's response template relies on).
        """
        values = self.prompt_values()
        first = fill_template(self.agent_prompt, values)
        if "{dialogue_history}" in self.agent_prompt:
            return [{"role": "user", "content": first}]
        return [{"role": "user", "content": first}] + [t.chat_message() for t in self.history[1:]]

    def record_agent_turn(self, prompt: str, raw_output: str) -> bool:
        """Store the agent's turn; returns True when the dialogue is over."""
        if self.done:
            raise RuntimeError("dialogue already finished")
        self.steps += 1
        parsed = parse_agent_output(raw_output)
        self.history.append(Turn(role="assistant", content=parsed.message,
                                 input=prompt, output=parsed.raw_output))
        self.on_agent_turn(parsed)
        if dialogue_ends(parsed, self.steps, self.max_steps):
            self.done = True
            self.on_final_turn(parsed)
        return self.done

    def on_agent_turn(self, parsed: ParsedTurn) -> None:
        """Hook: e.g. the frontend renders the HTML of every turn."""

    def on_final_turn(self, parsed: ParsedTurn) -> None:
        raise NotImplementedError

    # -- simulator side ------------------------------------------------------------------
    def simulator_messages(self) -> Conversation:
        """What the simulated human sees. Without ``{dialogue_history}`` in the template, the
        dialogue follows as chat messages with the roles swapped (the human is the model)."""
        values = self.prompt_values()
        text = fill_template(self.user_prompt, values)
        if "{dialogue_history}" in self.user_prompt:
            return [{"role": "user", "content": text}]
        swapped = {"user": "assistant", "assistant": "user"}
        rest = [{"role": swapped[t.role], "content": t.content} for t in self.history[1:]]
        return [{"role": "system", "content": text}] + rest

    def record_user_reply(self, reply: SimulatorReply) -> bool:
        """Store the human's reply (cut to ``reply_chars``); a rejected request ends the dialogue."""
        if reply.error is not None or reply.text is None:
            self.error = f"simulator: {reply.error or 'no reply'}"
            self.done = True
            return True
        self.history.append(Turn(role="user", content=reply.text[: self.reply_chars]))
        return False

    # -- result --------------------------------------------------------------------------
    def trajectory(self) -> Trajectory:
        extra = {"error": self.error} if self.error else {}
        return Trajectory(task=self.task, dialogue_history=list(self.history),
                          answer=self.answer, extra=extra)
