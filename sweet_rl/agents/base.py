"""The interface every agent backend implements."""

from __future__ import annotations

from typing import List, Optional

from sweet_rl.types import AgentOutput, ChatMessages

__all__ = ["Agent", "AgentOutput"]  # AgentOutput: re-exported, as before


class Agent:
    """Generates one reply per conversation in a batch.

    ``seeds`` (one per conversation, optional) make sampling reproducible per dialogue row,
    independently of how rows are batched.
    """

    name: str = "agent"
    # True for an agent behind a server (it batches concurrent requests itself): the pipelined
    # loop then sends it single requests from many threads instead of batching them.
    parallel_requests: bool = False

    def generate(self, conversations: List[ChatMessages],
                 seeds: Optional[List[int]] = None) -> List[AgentOutput]:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (GPU memory, threads)."""
