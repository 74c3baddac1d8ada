"""The interface every human simulator implements."""

from __future__ import annotations

from typing import Hashable, List, Optional, Sequence

from sweet_rl.types import ChatMessages, SimulatorReply

# One hashable per conversation (e.g. the dialogue's row index), the same for every turn of a
# dialogue. A simulator spread over several servers sends each dialogue to one server for its
# whole life so that server's prefix cache keeps paying off; the others ignore the keys.
DialogueKeys = Optional[Sequence[Hashable]]

__all__ = ["DialogueKeys", "Simulator", "SimulatorReply"]  # the last one re-exported


class Simulator:
    """Answers a batch of conversations, greedily (temperature 0), one reply per conversation."""

    name: str = "simulator"
    # True when the simulator answers several requests at once by itself (a server), so the
    # pipelined loop sends it single requests from many threads; False (in-process models):
    # the loop batches whatever is waiting and calls it from one thread.
    parallel_requests: bool = False

    def reply_batch(self, conversations: List[ChatMessages],
                    keys: DialogueKeys = None) -> List[SimulatorReply]:
        """One reply per conversation, in order; ``keys`` (optional) name each dialogue."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (threads, models)."""
