"""The interface every agent backend implements."""

from __future__ import annotations

from typing import Hashable, List, Optional, Sequence

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

    def generate(self, conversations: List[ChatMessages], seeds: Optional[List[int]] = None,
                 keys: Optional[Sequence[Hashable]] = None) -> List[AgentOutput]:
        """One reply per conversation. ``keys`` name each dialogue (its row); only an agent
        that needs to know which task a dialogue is (Best-of-N's critic, which reads the
        task's reference) uses them."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (GPU memory, threads)."""
