"""Backend programming: the human wants a Python function; the answer is its code."""

from __future__ import annotations

from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.environments.protocol import ParsedTurn, answer_text

BACKEND_REPLY_CHARS = 400


class BackendEnv(CollaborationEnv):
    """The simulated human holds the task's ``ground_truth`` as hidden information."""

    reply_chars = BACKEND_REPLY_CHARS
    checks_leaks = True  # the simulator reads the reference as code and could paste it

    def on_final_turn(self, parsed: ParsedTurn) -> None:
        self.answer = answer_text(parsed.message)
