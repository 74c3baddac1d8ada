"""The interface every human simulator implements."""

from __future__ import annotations

from typing import List

from sweet_rl.openai_compat import EndpointUnavailable
from sweet_rl.types import ChatMessages, SimulatorReply

# The name this error had when only the simulator talked to a server. The HTTP agent shares
# the client now, so the class itself is named after the endpoint; this alias keeps
# ``except SimulatorUnavailable`` (and code that imports it from here) working unchanged.
SimulatorUnavailable = EndpointUnavailable

__all__ = ["Simulator", "SimulatorReply", "SimulatorUnavailable"]  # the last two re-exported


class Simulator:
    """Answers a batch of conversations, greedily (temperature 0), one reply per conversation."""

    name: str = "simulator"

    def reply_batch(self, conversations: List[ChatMessages]) -> List[SimulatorReply]:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (threads, models)."""
