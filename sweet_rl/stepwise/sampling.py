"""N candidate actions per turn with their reference log-probs (the sample stage's logic).

The reference log-prob of a candidate is its log-prob under the model that sampled it,
conditioned on the turn's ``input`` (no ground truth): the rank stage subtracts it from the
critic's, so that ``judge_result`` measures what the critic adds over the agent itself.
Both the mean per token (what SWEET-RL ranks with) and the sum are kept.

As in the original (vLLM's per-token ``logprobs`` of each sample), the candidate's tokens
include the end-of-turn token it stopped on, although its text does not; ``include_stop=False``
leaves that token out. A candidate cut at ``max_new_tokens`` has no stop token.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

from sweet_rl.records import StepSample
from sweet_rl.seeding import candidate_seeds
from sweet_rl.stepwise.scoring import Score, mean_of


def with_candidates(record: StepSample, outputs: List[str], scores: List[Score]) -> StepSample:
    """A step record with its N candidates and their reference scores."""
    if len(outputs) != len(scores):
        raise ValueError(f"{len(outputs)} candidates but {len(scores)} scores")
    return dataclasses.replace(record, additional_outputs=list(outputs),
                               additional_reference_logprobs=[mean_of(s) for s in scores],
                               additional_reference_logprobs_sum=[float(s[0]) for s in scores])


class HFSampler:
    """Samples with :class:`~sweet_rl.models.hf_generation.HFGenerator` (the N copies of a prompt
    are one batch of ``batch_size`` rows at a time) and scores with the same loaded model."""

    def __init__(self, model_path: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                 device: Optional[str] = None, dtype: str = "auto", batch_size: int = 16,
                 prompt_cache: bool = True, include_stop: bool = True):
        from sweet_rl.models.hf_generation import HFGenerator
        from sweet_rl.stepwise.scoring import ContinuationScorer

        self.generator = HFGenerator(model_path, device=device, dtype=dtype,
                                     max_new_tokens=max_new_tokens, temperature=temperature,
                                     batch_size=batch_size)
        self.scorer = ContinuationScorer(model=self.generator.model,
                                         tokenizer=self.generator.tokenizer,
                                         batch_size=batch_size, prompt_cache=prompt_cache)
        self.include_stop = include_stop
        self.generated_tokens = 0  # over every call, for throughput figures

    def sample(
        self, prompts: List[str], n: int, seeds: List[int], score: bool = True
    ) -> List[Tuple[List[str], Optional[List[Score]]]]:
        """For each prompt, ``n`` sampled texts and (``score``) the model's log-probs of each;
        ``score=False`` leaves the scores out (None), for a caller that never reads them."""
        results = []
        for prompt, seed in zip(prompts, seeds):
            done = self.generator.generate_with_stops(
                [prompt] * int(n), seeds=candidate_seeds(seed, n)
            )
            texts = [g.text for g in done]
            self.generated_tokens += sum(g.tokens for g in done)
            # the stop token is scored after the text, as vLLM's token_ids/logprobs hold it
            suffixes = [[g.stop_id] if self.include_stop and g.stop_id is not None else []
                        for g in done]
            results.append((texts, self.scorer.score(prompt, texts, suffixes) if score else None))
        return results

    def close(self) -> None:
        """Nothing to release: the model goes with the sampler (vLLM's engine needs one)."""


def build_sampler(backend: str, model_path: str, temperature: float, max_new_tokens: int,
                  device: Optional[str], dtype: str, batch_size: int, seed: int,
                  include_stop: bool = True):
    if backend == "hf":
        return HFSampler(model_path, temperature, max_new_tokens, device, dtype, batch_size,
                         include_stop=include_stop)
    if backend == "vllm":
        from sweet_rl.stepwise.vllm_backend import VLLMSampler

        return VLLMSampler(model_path, temperature, max_new_tokens, seed,
                           include_stop=include_stop, dtype=dtype)
    raise ValueError(f"unknown backend {backend!r}; choose hf or vllm")
