"""The in-process human simulator: a local transformers model, greedy decoding.

The embedded default when no ``--hostname`` is given: the demo and the tests run the whole
dialogue loop on the CPU without any server.
"""

from __future__ import annotations

from typing import List, Optional

from sweet_rl.simulators.base import DialogueKeys, Simulator
from sweet_rl.types import ChatMessages, SimulatorReply


class LocalSimulator(Simulator):
    name = "local"

    def __init__(self, model_path: str, max_new_tokens: int = 256, device: Optional[str] = None,
                 dtype: str = "auto", batch_size: int = 16, generator=None):
        from sweet_rl.models.hf_generation import HFGenerator

        self.generator = generator or HFGenerator(
            model_path, device=device, dtype=dtype, max_new_tokens=max_new_tokens,
            temperature=0.0, batch_size=batch_size)
        self.max_new_tokens = max_new_tokens

    def reply_batch(self, conversations: List[ChatMessages],
                    keys: DialogueKeys = None) -> List[SimulatorReply]:
        if not conversations:
            return []
        prompts = [self.generator.format(messages) for messages in conversations]
        texts = self.generator.generate(prompts, temperature=0.0,
                                        max_new_tokens=self.max_new_tokens)
        return [SimulatorReply(text=t) for t in texts]
