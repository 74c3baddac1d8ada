"""The critic's judgement of each candidate (the rank stage's logic).

``judge_result[k] = critic(context + candidate_k) - reference_k``, where the context is the
turn's ``input_with_ground_truth`` (the critic was trained with the reference solution in
front; ``--no_use_ground_truth`` gives it the plain ``input`` instead, the paper's ablation),
the critic term covers the tokens ``--score_tokens`` names (:mod:`sweet_rl.stepwise.spans`;
by default the original's: the whole text), and both terms are per-token means (SWEET-RL's
length normalisation) or, with ``--use_sum``, sums over the same tokens (the paper's ablation
that collapses training). The reference is the sampling model's score stored by the sample
stage, computed without the ground truth -- the original code's choice (docs/differences.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

from sweet_rl.records import StepSample
from sweet_rl.stepwise.scoring import Score, mean_of


def parse_step(data: Dict[str, Any]) -> StepSample:
    """A step record as the rank stage reads it: candidates are strings, reference scores
    numbers (an error names the field, e.g. ``additional_outputs[2]``)."""
    from sweet_rl.records import RecordError

    sample = StepSample.from_dict(data)
    for key, types in (("additional_outputs", str), ("additional_reference_logprobs", (int, float)),
                       ("additional_reference_logprobs_sum", (int, float))):
        for k, value in enumerate(getattr(sample, key)):
            if not isinstance(value, types) or isinstance(value, bool):
                raise RecordError(f"expected {'a string' if types is str else 'a number'}, "
                                  f"got {type(value).__name__}", field=f"{key}[{k}]")
    return sample


def parse_ranked(data: Dict[str, Any]) -> StepSample:
    """A ranked step record as the pair stage reads it: a step record with ``judge_result``
    of numbers."""
    from sweet_rl.records import RecordError

    sample = parse_step(data)
    if sample.judge_result is None:
        raise RecordError("missing (run the rank stage first)", field="judge_result")
    for k, value in enumerate(sample.judge_result):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RecordError(f"expected a number, got {type(value).__name__}",
                              field=f"judge_result[{k}]")
    return sample


def judge_results(critic_scores: Sequence[Score], sample: StepSample,
                  use_sum: bool = False) -> List[float]:
    """One ``judge_result`` per candidate; N comes from the record itself."""
    reference = (sample.additional_reference_logprobs_sum if use_sum
                 else sample.additional_reference_logprobs)
    if len(critic_scores) != len(reference):
        raise ValueError(f"{len(critic_scores)} critic scores for {len(reference)} candidates")
    critic = [float(s[0]) if use_sum else mean_of(s) for s in critic_scores]
    return [c - float(r) for c, r in zip(critic, reference)]


def critic_context(sample: StepSample, use_ground_truth: bool = True) -> str:
    return sample.input_with_ground_truth if use_ground_truth else sample.input


def critic_items(tokenizer, samples: Sequence[StepSample], use_ground_truth: bool,
                 mode: str) -> List[Tuple[List[List[int]], List[int]]]:
    """Per turn: the token rows of the critic's texts and each row's first scored position."""
    from sweet_rl.stepwise.spans import critic_rows

    return [critic_rows(tokenizer, critic_context(s, use_ground_truth), s.additional_outputs, mode)
            for s in samples]


def ranked(sample: StepSample, judge: List[float]) -> StepSample:
    """The step record with ``judge_result`` added (every other key unchanged)."""
    return dataclasses.replace(sample, judge_result=list(judge))


def build_scorer(backend: str, model_path: str, device, dtype: str, batch_size: int,
                 prompt_cache: bool, seed: int = 0):
    if backend == "hf":
        from sweet_rl.stepwise.scoring import ContinuationScorer

        return ContinuationScorer(model_path, device=device, dtype=dtype,
                                  batch_size=batch_size, prompt_cache=prompt_cache)
    if backend == "vllm":
        from sweet_rl.stepwise.vllm_backend import VLLMScorer

        return VLLMScorer(model_path, seed=seed, dtype=dtype)
    raise ValueError(f"unknown backend {backend!r}; choose hf or vllm")
