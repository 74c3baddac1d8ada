"""The interface every agent backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

ChatMessages = List[Dict[str, str]]


@dataclass
class AgentOutput:
    """``prompt`` is the chat-formatted text the model saw; ``output`` its raw generation."""

    prompt: str
    output: str


class Agent:
    """Generates one reply per conversation in a batch.

    ``seeds`` (one per conversation, optional) make sampling reproducible per dialogue row,
    independently of how rows are batched.
    """

    name: str = "agent"

    def generate(self, conversations: List[ChatMessages],
                 seeds: Optional[List[int]] = None) -> List[AgentOutput]:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (GPU memory, threads)."""
