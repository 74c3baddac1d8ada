"""Sampling and scoring on vLLM (vLLM is imported, through :mod:`sweet_rl.models.vllm_engine`, when
one of these is built).

The vLLM objects used:

* sampling: one request per candidate, ``SamplingParams(n=1, temperature, max_tokens,
  seed, logprobs=0, ...)`` seeded as the ``hf`` backend seeds its candidates
  (:func:`sweet_rl.seeding.candidate_seeds` of the record's seed), so a candidate depends only
  on ``--seed`` and its record's global index, on either backend; each
  ``RequestOutput.outputs[0]`` (a ``CompletionOutput``) has ``text``, ``token_ids``,
  ``logprobs`` (one ``{token_id: Logprob}`` dict per generated token, holding at least the
  sampled token) and ``cumulative_logprob``;
* scoring: ``SamplingParams(prompt_logprobs=0, max_tokens=1)`` on ``{"prompt_token_ids": ids}``
  (the ids of :mod:`sweet_rl.stepwise.spans`, so both backends score the same tokens);
  ``RequestOutput.prompt_logprobs`` has one entry per prompt token, ``None`` for the first and
  a ``{token_id: Logprob}`` dict (holding the prompt's own token) for the others.

Turning those objects into numbers is done by the pure functions below, which the tests check
with small stand-in objects and, in the vLLM environment, on the engine itself.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from sweet_rl.models.vllm_engine import logprob_value
from sweet_rl.seeding import candidate_seeds
from sweet_rl.stepwise.scoring import Score, SpanScorer


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
        if completion.cumulative_logprob is None:  # V1 without logprobs: nothing to sum
            raise ValueError("the completion carries no log-probs: request logprobs=0")
        return float(completion.cumulative_logprob), len(token_ids)
    count = len(token_ids)
    if not include_stop and count and token_ids[-1] in set(stop_ids):
        count -= 1
    total = sum(logprob_value(per_token[i][token_ids[i]]) for i in range(count))
    return total, count


def request_candidates(request_outputs: Sequence[Any], stop_ids: Sequence[int],
                       include_stop: bool = True,
                       decode: Optional[Callable[[Any], str]] = None,
                       ) -> Tuple[List[str], List[Score]]:
    """Texts and scores of a record's N candidates, one ``RequestOutput`` each, in order;
    ``decode`` turns a completion into its text (default: vLLM's ``text``)."""
    outputs = [r.outputs[0] for r in request_outputs]
    texts = [decode(o) if decode is not None else o.text for o in outputs]
    return texts, [completion_score(o, stop_ids, include_stop) for o in outputs]


def prompt_tail_score(prompt_logprobs: Sequence[Optional[Dict[int, Any]]],
                      token_ids: Sequence[int], num_context: int) -> Score:
    """(sum, count) of the tokens after the first ``num_context`` of a scored prompt (the
    span of :mod:`sweet_rl.stepwise.spans` starts at position ``num_context``)."""
    if len(prompt_logprobs) != len(token_ids):
        raise ValueError(f"{len(prompt_logprobs)} prompt log-probs for {len(token_ids)} tokens")
    if num_context < 1:
        raise ValueError("the context must hold at least one token")
    positions = range(num_context, len(token_ids))
    total = sum(logprob_value(prompt_logprobs[t][token_ids[t]]) for t in positions)
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


def sampling_kwargs(temperature: float, max_tokens: int, seed: int, stop_ids: Sequence[int],
                    top_p: float = 1.0) -> Dict[str, Any]:
    """Keyword arguments of the ``SamplingParams`` of one candidate."""
    return dict(n=1, temperature=float(temperature), top_p=float(top_p),
                max_tokens=int(max_tokens), seed=int(seed), logprobs=0,
                stop_token_ids=list(stop_ids), skip_special_tokens=True)


def candidate_requests(prompts: Sequence[str], n: int, seeds: Sequence[int], temperature: float,
                       max_tokens: int, stop_ids: Sequence[int],
                       top_p: float = 1.0) -> List[Tuple[str, Dict[str, Any]]]:
    """(prompt, SamplingParams keyword arguments) for every candidate of every record, record
    by record; candidate ``j`` of the record seeded ``s`` is seeded ``candidate_seeds(s)[j]``.

    Not one request with ``n=N`` and the record's seed: vLLM's V1 engine seeds such a
    request's samples ``s, s + 1, ...``, and ``s + 1`` is the next record's seed.
    """
    return [(prompt, sampling_kwargs(temperature, max_tokens, candidate, stop_ids, top_p))
            for prompt, seed in zip(prompts, seeds) for candidate in candidate_seeds(seed, n)]


class VLLMSampler:
    """N candidates per prompt and their reference scores under the sampling model. ``llm``:
    an engine already loaded on ``model_path`` (then the caller's to close)."""

    def __init__(self, model_path: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                 seed: int = 0, include_stop: bool = True, dtype: str = "auto", llm=None,
                 **llm_kwargs):
        from sweet_rl.models import vllm_engine
        from sweet_rl.models.hf_generation import load_tokenizer, stop_token_ids

        self.owns_llm = llm is None
        self.llm = llm if llm is not None else vllm_engine.load_llm(
            model_path, seed=seed, dtype=dtype, **llm_kwargs)
        self.tokenizer = load_tokenizer(model_path)
        self.stop_ids = stop_token_ids(self.tokenizer)
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.include_stop = include_stop

    def sample(
        self, prompts: List[str], n: int, seeds: List[int]
    ) -> List[Tuple[List[str], List[Score]]]:
        from sweet_rl.models import vllm_engine

        requests = candidate_requests(prompts, n, seeds, self.temperature, self.max_new_tokens,
                                      self.stop_ids)
        results = vllm_engine.generate(self.llm, [prompt for prompt, _ in requests],
                                       [vllm_engine.sampling_params(**kw) for _, kw in requests])
        n = int(n)
        decode = partial(vllm_engine.completion_text, self.tokenizer)
        return [request_candidates(results[k * n:(k + 1) * n], self.stop_ids, self.include_stop,
                                   decode) for k in range(len(prompts))]

    def close(self) -> None:
        _close(self)


class VLLMScorer(SpanScorer):
    """Scores token rows through prompt log-probs; ``score_many`` batches several turns.
    ``llm``: an engine already loaded on ``model_path`` (then the caller's to close)."""

    def __init__(self, model_path: str, seed: int = 0, dtype: str = "auto", llm=None,
                 **llm_kwargs):
        from sweet_rl.models import vllm_engine
        from sweet_rl.models.hf_generation import load_tokenizer

        self.owns_llm = llm is None
        self.llm = llm if llm is not None else vllm_engine.load_llm(
            model_path, seed=seed, dtype=dtype, **llm_kwargs)
        self.tokenizer = load_tokenizer(model_path)

    def score_many(self, items: List[Tuple[List[List[int]], List[int]]]) -> List[List[Score]]:
        """Per turn (rows, first scored positions) -> one (sum, count) per row."""
        from sweet_rl.models import vllm_engine

        requests = span_requests(items)
        results = vllm_engine.generate(
            self.llm, [vllm_engine.token_prompt(ids) for ids, _ in requests],
            vllm_engine.sampling_params(prompt_logprobs=0, max_tokens=1))
        return span_scores(items, requests, results)

    def score_spans(self, rows: List[List[int]], starts: List[int]) -> List[Score]:
        return self.score_many([(rows, starts)])[0]

    def close(self) -> None:
        _close(self)


def _close(owner) -> None:
    if owner.owns_llm and owner.llm is not None:
        from sweet_rl.models.vllm_engine import close_llm

        close_llm(owner.llm)
    owner.llm = None
