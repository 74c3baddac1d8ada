"""Types shared by the agents, the simulators, the environments and the critic's stages.

They live here, below every one of those packages, so that none of them has to import
another to name what passes between them: an environment builds the messages and reads the
replies, but it never needs the simulator classes themselves. Nothing here imports anything
of sweet_rl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

# One conversation in the OpenAI chat layout: [{"role": "user", "content": "..."}, ...]. The
# agent only ever sees string contents; a vision-language simulator may also get a list of
# parts ({"type": "text"|"image_url", ...}) as the content, hence ``object``.
ChatMessages = List[Dict[str, object]]

# What the critic reads before a prompt when it may use the training-time information: the
# original's wording, shared by the trajectory-level pairs and the step records.
GROUND_TRUTH_PREFIX = "In light that the final answer is: {ground_truth}."


@dataclass
class AgentOutput:
    """``prompt`` is the chat-formatted text the model saw; ``output`` its raw generation;
    ``extra``: keys stored with the turn (Best-of-N: the candidates and their scores)."""

    prompt: str
    output: str
    extra: Optional[Dict[str, object]] = None


@dataclass
class SimulatorReply:
    """The simulated human's answer, or why there is none.

    ``error`` is set when the server rejected the request (e.g. HTTP 400, context too long):
    the dialogue then ends with that error recorded, instead of a made-up reply.
    """

    text: Optional[str]
    error: Optional[str] = None
