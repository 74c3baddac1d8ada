"""Sampling and scoring on vLLM (GPU only; vLLM is imported when one of these is built).

The documented vLLM objects used:

* sampling: ``SamplingParams(n=N, temperature, max_tokens, seed, logprobs=0, ...)``; each
  ``RequestOutput.outputs[k]`` (a ``CompletionOutput``) has ``text``, ``token_ids``,
  ``logprobs`` (one ``{token_id: Logprob}`` dict per generated token, holding at least the
  sampled token) and ``cumulative_logprob``;
* scoring: ``SamplingParams(prompt_logprobs=0, max_tokens=1)`` on ``{"prompt_token_ids": ids}``
  (the ids of :mod:`sweet_rl.stepwise.spans`, so both backends score the same tokens);
  ``RequestOutput.prompt_logprobs`` has one entry per prompt token, ``None`` for the first and
  a ``{token_id: Logprob}`` dict (holding the prompt's own token) for the others.

Turning those objects into numbers is done by the pure functions below, which the tests check
with small stand-in objects. vLLM reuses shared prompt prefixes itself (prefix caching), so
the N candidates of a turn are simply sent as N prompts.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from sweet_rl.stepwise.scoring import Score, SpanScorer


def _logprob_value(entry: Any) -> float:
    """vLLM's ``Logprob`` objects carry ``.logprob``; plain floats are accepted too."""
    return float(getattr(entry, "logprob", entry))


def completion_score(completion: Any, stop_ids: Sequence[int], include_stop: bool = True) -> Score:
    """(sum, count) of a sampled completion's token log-probs.

    vLLM keeps the end-of-turn token it stopped on in ``token_ids`` and ``logprobs`` while its
    ``text`` (decoded without special tokens) drops it. The original averaged over every
    entry of ``logprobs``, stop token included; ``include_stop=False`` leaves it out (a
    completion cut at ``max_tokens`` has none either way). Without per-token ``logprobs``
    (``logprobs=None``) the cumulative log-prob is all there is, stop token included.
    """
    token_ids = list(completion.token_ids)
    per_token = getattr(completion, "logprobs", None)
    if per_token is None:
        return float(completion.cumulative_logprob or 0.0), len(token_ids)
    count = len(token_ids)
    if not include_stop and count and token_ids[-1] in set(stop_ids):
        count -= 1
    total = sum(_logprob_value(per_token[i][token_ids[i]]) for i in range(count))
    return total, count


def request_candidates(request_output: Any, stop_ids: Sequence[int],
                       include_stop: bool = True) -> Tuple[List[str], List[Score]]:
    """Texts and scores of the N completions of one ``RequestOutput``, in vLLM's order."""
    outputs = list(request_output.outputs)
    return [o.text for o in outputs], [completion_score(o, stop_ids, include_stop) for o in outputs]


def prompt_tail_score(prompt_logprobs: Sequence[Optional[Dict[int, Any]]],
                      token_ids: Sequence[int], num_context: int) -> Score:
    """(sum, count) of the tokens after the first ``num_context`` of a scored prompt (the
    span of :mod:`sweet_rl.stepwise.spans` starts at position ``num_context``)."""
    if len(prompt_logprobs) != len(token_ids):
        raise ValueError(f"{len(prompt_logprobs)} prompt log-probs for {len(token_ids)} tokens")
    if num_context < 1:
        raise ValueError("the context must hold at least one token")
    positions = range(num_context, len(token_ids))
    total = sum(_logprob_value(prompt_logprobs[t][token_ids[t]]) for t in positions)
    return total, len(positions)


def span_requests(
    items: Sequence[Tuple[List[List[int]], List[int]]],
) -> List[Tuple[List[int], int]]:
    """One (token ids, first scored position) request per row of every turn, in order."""
    return [(list(row), max(1, int(start))) for rows, starts in items
            for row, start in zip(rows, starts)]


def span_scores(
    items: Sequence[Tuple[List[List[int]], List[int]]],
    requests: Sequence[Tuple[List[int], int]],
    results: Sequence[Any],
) -> List[List[Score]]:
    """The ``RequestOutput``s of :func:`span_requests` back into one score list per turn."""
    flat = [prompt_tail_score(r.prompt_logprobs, ids, start)
            for r, (ids, start) in zip(results, requests)]
    out, begin = [], 0
    for rows, _ in items:
        out.append(flat[begin:begin + len(rows)])
        begin += len(rows)
    return out


def sampling_kwargs(n: int, temperature: float, max_tokens: int, seed: int,
                    stop_ids: Sequence[int], top_p: float = 1.0) -> Dict[str, Any]:
    """Keyword arguments of the ``SamplingParams`` for one turn's N candidates."""
    return dict(n=int(n), temperature=float(temperature), top_p=float(top_p),
                max_tokens=int(max_tokens), seed=int(seed), logprobs=0,
                stop_token_ids=list(stop_ids), skip_special_tokens=True)


def _llm(model_path: str, seed: int = 0, gpu_memory_utilization: float = 0.9,
         max_model_len: Optional[int] = None):
    import torch

    from sweet_rl.agents.vllm_agent import require_vllm

    vllm = require_vllm()
    return vllm.LLM(model=model_path, tensor_parallel_size=max(1, torch.cuda.device_count()),
                    gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                    seed=seed)


class VLLMSampler:
    """N candidates per prompt and their reference scores under the sampling model."""

    def __init__(self, model_path: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                 seed: int = 0, include_stop: bool = True, **llm_kwargs):
        from sweet_rl.hf_generation import load_tokenizer, stop_token_ids

        self.llm = _llm(model_path, seed, **llm_kwargs)
        self.stop_ids = stop_token_ids(load_tokenizer(model_path))
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.include_stop = include_stop

    def sample(
        self, prompts: List[str], n: int, seeds: List[int]
    ) -> List[Tuple[List[str], List[Score]]]:
        from vllm import SamplingParams

        params = [SamplingParams(**sampling_kwargs(n, self.temperature, self.max_new_tokens,
                                                   s, self.stop_ids)) for s in seeds]
        results = self.llm.generate(prompts, params, use_tqdm=False)
        return [request_candidates(r, self.stop_ids, self.include_stop) for r in results]


class VLLMScorer(SpanScorer):
    """Scores token rows through prompt log-probs; ``score_many`` batches several turns."""

    def __init__(self, model_path: str, seed: int = 0, **llm_kwargs):
        from sweet_rl.hf_generation import load_tokenizer

        self.llm = _llm(model_path, seed, **llm_kwargs)
        self.tokenizer = load_tokenizer(model_path)

    def score_many(self, items: List[Tuple[List[List[int]], List[int]]]) -> List[List[Score]]:
        """Per turn (rows, first scored positions) -> one (sum, count) per row."""
        from vllm import SamplingParams

        requests = span_requests(items)
        results = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in requests],
                                    SamplingParams(prompt_logprobs=0, max_tokens=1), use_tqdm=False)
        return span_scores(items, requests, results)

    def score_spans(self, rows: List[List[int]], starts: List[int]) -> List[Score]:
        return self.score_many([(rows, starts)])[0]
