"""The ``hf`` agent: transformers ``generate``, batched over every running dialogue."""

from __future__ import annotations

from typing import List, Optional

from sweet_rl.agents.base import Agent
from sweet_rl.types import AgentOutput, ChatMessages


class HFAgent(Agent):
    name = "hf"

    def __init__(self, model_path: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                 device: Optional[str] = None, dtype: str = "auto", batch_size: int = 16,
                 generator=None):
        from sweet_rl.models.hf_generation import HFGenerator

        self.generator = generator or HFGenerator(
            model_path, device=device, dtype=dtype, max_new_tokens=max_new_tokens,
            temperature=temperature, batch_size=batch_size)
        self.temperature = temperature
        self.model_path = model_path

    def generate(self, conversations: List[ChatMessages], seeds: Optional[List[int]] = None,
                 keys=None) -> List[AgentOutput]:
        prompts = [self.generator.format(messages) for messages in conversations]
        texts = self.generator.generate(prompts, seeds=seeds, temperature=self.temperature)
        return [AgentOutput(prompt=p, output=t) for p, t in zip(prompts, texts)]
