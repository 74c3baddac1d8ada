"""An agent that samples N candidate replies per turn and lets a critic pick one (Best-of-N).

The paper's Figure 3a measures a critic by this: at every turn of a test dialogue the agent
samples N actions and the critic's choice is played; a critic that credits the right turns
raises success with N, a random choice does not. The score is the rank stage's
``judge_result`` (:mod:`sweet_rl.stepwise.ranking`): the critic's log-prob of the candidate,
given the turn's prompt (with the task's reference in front for a critic trained with
training-time information), minus the sampling model's own log-prob. ``critic_model=None``
picks uniformly at random, with the turn's seed.
"""

from __future__ import annotations

import random
from typing import Callable, List, Optional

from sweet_rl.agents.base import Agent
from sweet_rl.types import AgentOutput, ChatMessages


class CriticPickAgent(Agent):
    name = "critic_pick"

    def __init__(self, agent_model: str, n: int, truth_of: Callable[[ChatMessages], str],
                 critic_model: Optional[str] = None, use_ground_truth: bool = True,
                 temperature: float = 1.0, max_new_tokens: int = 1024,
                 score_tokens: str = "original", device: Optional[str] = None,
                 batch_size: int = 16):
        from sweet_rl.stepwise.sampling import HFSampler

        self.sampler = HFSampler(agent_model, temperature, max_new_tokens, device,
                                 batch_size=batch_size)
        self.critic = None
        if critic_model is not None:
            from sweet_rl.stepwise.scoring import ContinuationScorer

            self.critic = ContinuationScorer(critic_model, device=device, batch_size=batch_size)
        self.n, self.truth_of = int(n), truth_of
        self.use_ground_truth, self.score_tokens = use_ground_truth, score_tokens

    def pick(self, prompt: str, truth: str, texts: List[str], reference, seed: int) -> int:
        """The index of the candidate played."""
        if self.critic is None or len(texts) == 1:
            return random.Random(seed).randrange(len(texts))
        from sweet_rl.records import StepSample
        from sweet_rl.stepwise.ranking import critic_items, judge_results
        from sweet_rl.stepwise.sampling import with_candidates
        from sweet_rl.stepwise.turns import with_ground_truth

        record = with_candidates({"input": prompt, "input_with_ground_truth":
                                  with_ground_truth(prompt, truth), "older_output": "",
                                  "reward": 0.0, "ground_truth": truth, "messages": []},
                                 texts, reference)
        sample = StepSample.from_dict(record)
        items = critic_items(self.critic.tokenizer, [sample], self.use_ground_truth,
                             self.score_tokens)
        [scores] = self.critic.score_many(items)
        judge = judge_results(scores, sample)
        return max(range(len(texts)), key=lambda k: judge[k])  # first best on ties

    def generate(self, conversations: List[ChatMessages],
                 seeds: Optional[List[int]] = None) -> List[AgentOutput]:
        from sweet_rl.hf_generation import format_chat

        seeds = list(seeds) if seeds is not None else list(range(len(conversations)))
        outputs = []
        for messages, seed in zip(conversations, seeds):
            prompt = format_chat(self.sampler.generator.tokenizer, messages)
            [(texts, reference)] = self.sampler.sample([prompt], self.n, [seed])
            chosen = self.pick(prompt, self.truth_of(messages), texts, reference, seed)
            outputs.append(AgentOutput(prompt=prompt, output=texts[chosen]))
        return outputs
