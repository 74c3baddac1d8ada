"""The interface every human simulator implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

# One chat conversation in OpenAI format: [{"role": "user", "content": "..."}, ...].
# ``content`` may also be a list of parts ({"type": "text"|"image_url", ...}) for
# vision-language simulators.
Conversation = List[Dict[str, object]]


@dataclass
class SimulatorReply:
    """The simulated human's answer, or why there is none.

    ``error`` is set when the server rejected the request (e.g. HTTP 400, context too long):
    the dialogue then ends with that error recorded, instead of a made-up reply.
    """

    text: Optional[str]
    error: Optional[str] = None


class SimulatorUnavailable(RuntimeError):
    """The simulator cannot be reached at all: the run must stop, naming the URL."""


class Simulator:
    """Answers a batch of conversations, greedily (temperature 0), one reply per conversation."""

    name: str = "simulator"

    def reply_batch(self, conversations: List[Conversation]) -> List[SimulatorReply]:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (threads, models)."""
