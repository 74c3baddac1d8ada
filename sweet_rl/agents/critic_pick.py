"""An agent that samples N candidate replies per turn and lets a critic pick one (Best-of-N).

The paper's Figure 3a measures a critic by this: at every turn of a test dialogue the agent
samples N actions and the critic's choice is played; a critic that credits the right turns
raises success with N, a random choice does not. The critic is any step critic of
:mod:`sweet_rl.stepwise.judges` (log-prob, regression head, value head, LLM-as-a-Judge),
scoring the turn's candidates as the rank stage does, from a step record of the turn: its
prompt, the prompt with the task's reference in front, the candidates with the sampling
model's own log-probs, and the dialogue so far. ``judge=None`` picks uniformly at random,
with the turn's seed. Each played turn keeps the candidates, their scores and the index
played (``candidates``, ``candidate_scores``, ``picked`` in the turn's row).

The agent never sees the task, but the critic reads its reference: the rollout loops name
each dialogue by its row (``keys``), and ``truth_of(key)`` gives that row's reference. (Mapping
a dialogue's request to a reference is not enough: tasks of one family share their request
and differ only in the hidden details.)
"""

from __future__ import annotations

import random
from typing import Callable, Hashable, List, Optional, Sequence

from sweet_rl.agents.base import Agent
from sweet_rl.types import AgentOutput, ChatMessages


class CriticPickAgent(Agent):
    name = "critic_pick"

    def __init__(self, agent_model: str, n: int, truth_of: Callable[[Hashable], str],
                 judge=None, temperature: float = 1.0, max_new_tokens: int = 1024,
                 device: Optional[str] = None, batch_size: int = 16):
        from sweet_rl.stepwise.sampling import HFSampler

        if int(n) < 1:
            raise ValueError(f"Best-of-N needs N >= 1, got {n}")
        self.sampler = HFSampler(agent_model, temperature, max_new_tokens, device,
                                 batch_size=batch_size)
        self.judge, self.n, self.truth_of = judge, int(n), truth_of

    def scores(self, messages: ChatMessages, prompt: str, texts: List[str], reference,
               seed: int, key: Optional[Hashable] = None) -> List[float]:
        """One score per candidate: the judge's, or 1 for one drawn with the turn's seed."""
        if self.judge is None:
            drawn = random.Random(seed).randrange(len(texts))
            return [1.0 if k == drawn else 0.0 for k in range(len(texts))]
        from sweet_rl.records import StepSample
        from sweet_rl.stepwise.sampling import with_candidates
        from sweet_rl.stepwise.turns import with_ground_truth

        if key is None:
            raise ValueError("Best-of-N with a critic needs each dialogue's key (its row) to "
                             "find the task's reference")
        truth = self.truth_of(key)
        turn = StepSample(input=prompt, input_with_ground_truth=with_ground_truth(prompt, truth),
                          older_output="", reward=0.0, ground_truth=truth, messages=list(messages))
        record = with_candidates(turn, texts, reference)
        [judged] = self.judge.judge([record])
        return [float(v) for v in judged]

    def generate(self, conversations: List[ChatMessages], seeds: Optional[List[int]] = None,
                 keys: Optional[Sequence[Hashable]] = None) -> List[AgentOutput]:
        from sweet_rl.models.hf_generation import format_chat

        seeds = list(seeds) if seeds is not None else list(range(len(conversations)))
        keys = list(keys) if keys is not None else [None] * len(conversations)
        outputs = []
        for messages, seed, key in zip(conversations, seeds, keys):
            prompt = format_chat(self.sampler.generator.tokenizer, messages)
            # a random pick reads no log-probs: the sampling model does not score its texts
            [(texts, reference)] = self.sampler.sample([prompt], self.n, [seed],
                                                       score=self.judge is not None)
            scores = self.scores(messages, prompt, texts, reference, seed, key)
            picked = max(range(len(texts)), key=lambda k: scores[k])  # first best on ties
            outputs.append(AgentOutput(prompt=prompt, output=texts[picked], extra={
                "candidates": list(texts), "candidate_scores": scores, "picked": picked}))
        return outputs

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()
