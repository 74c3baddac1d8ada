"""Token log-probs of N sequences that share a long prefix, with transformers.

Both stages score N sequences per turn that start the same way: the reference log-probs
(sample stage: the agent's prompt + each candidate) and the critic's scores (rank stage: the
critic's text for each candidate, see :mod:`sweet_rl.stepwise.spans`). A score is the
(sum, count) of ``log p(row[t] | row[:t])`` over a span ``t in [start, len(row))``.

With ``prompt_cache`` (the default) the common prefix of the N rows is run through the model
once: its KV cache is then expanded over a batch of rows, and the log-probs of its own tokens
(which the critic's ``original`` and ``turn`` spans include) are computed once per turn. The
cache holds the prefix minus its last token: that token is fed again at the head of every
row, so each row's logits score its first own token too. Without the cache every row is run
whole (a cross-check and the benchmark's baseline); both give the same numbers up to float
rounding.

Logits are never materialised for a whole long sequence: the model's hidden states go through
the output layer ``logit_positions`` rows x positions at a time (a 8000-token prompt times a
128k vocabulary would be 4 GB of float32 logits).
"""

from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Tuple

logger = logging.getLogger(__name__)

Score = Tuple[float, int]  # (sum of token log-probs, number of tokens)
LOGIT_POSITIONS = 1024  # positions (over all rows of a batch) sent through the output layer at once


def encode(tokenizer, text: str) -> List[int]:
    """Chat-formatted text already carries ``<|begin_of_text|>``: add no special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def common_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix all rows share."""
    if not rows:
        return 0
    length = min(len(r) for r in rows)
    first = rows[0]
    for row in rows[1:]:
        t = 0
        while t < length and row[t] == first[t]:
            t += 1
        length = t
    return length


def cache_tensors(cache) -> List[Tuple["object", "object"]]:
    """(keys, values) per layer, each (1, heads, P, head_dim), from a transformers cache.

    transformers >= 4.56 keeps them in ``cache.layers[i].keys/.values``; older versions in
    ``key_cache``/``value_cache``; very old ones return tuples. (Which one depends on the
    installed transformers, not on anything of ours, so it is read off the object.)
    """
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    keys = getattr(cache, "key_cache", None)
    if keys is not None:
        return list(zip(keys, cache.value_cache))
    return [(k, v) for k, v in cache]


def expanded_cache(kv, batch: int, config=None):
    """A fresh DynamicCache whose every row is the prefix's cache.

    A DynamicCache is mutated by each forward (new keys are concatenated onto it), so the
    prefix's own cache is never handed to the model twice: each chunk of rows gets a new
    cache built from broadcast views (``expand`` copies nothing; the first update does).
    """
    from transformers import DynamicCache

    data = [
        (k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in kv
    ]  # (B, H, P-1, D)
    try:
        return DynamicCache(ddp_cache_data=data, config=config)
    except TypeError:  # transformers < 4.56
        return DynamicCache.from_legacy_cache(tuple(data))


def _pad(rows: Sequence[Sequence[int]], value: int):
    """Right-pad id rows; returns ids (B, L) and a mask (B, L) that is 1 on real tokens."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)  # (B, L)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, L)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, :len(row)] = 1
    return ids, mask


def span_score(logps: Sequence[float], first: int, start: int) -> Score:
    """(sum, count) of the entries of ``logps`` for positions >= ``start``; ``logps[i]`` is the
    log-prob of the token at position ``first + i``."""
    picked = logps[max(0, start - first):]
    return float(sum(picked)), len(picked)


class SpanScorer:
    """What the rank stage needs of a critic backend: its ``tokenizer`` and span scores.

    ``score_spans(rows, starts)``: (sum, count) of ``log p(row[t] | row[:t])`` for ``t`` in
    ``[max(start, 1), len(row))``, one per row. ``score_many`` does that for several turns;
    it scores them one by one here, and a backend that gains from one big call (vLLM: a
    single engine call for a whole chunk) overrides it.
    """

    tokenizer = None

    def score_spans(self, rows: Sequence[Sequence[int]], starts: Sequence[int]) -> List[Score]:
        raise NotImplementedError

    def score_many(self, items: Sequence[Tuple[Sequence[Sequence[int]], Sequence[int]]]
                   ) -> List[List[Score]]:
        """Per turn (rows, first scored positions) -> one (sum, count) per row."""
        return [self.score_spans(rows, starts) for rows, starts in items]


class ContinuationScorer(SpanScorer):
    """Scores rows under one causal LM: ``score_spans(rows, starts)`` -> [(sum, count)].

    ``batch_size`` rows go through one forward pass (the cache is expanded to that many
    rows). ``dtype`` as in :class:`~sweet_rl.models.hf_generation.HFGenerator`.
    """

    def __init__(self, model_path: Optional[str] = None, device: Optional[str] = None,
                 dtype: str = "auto", batch_size: int = 16, prompt_cache: bool = True,
                 model=None, tokenizer=None, logit_positions: int = LOGIT_POSITIONS):
        from sweet_rl.models.hf_generation import HFGenerator

        if model is None or tokenizer is None:
            # HFGenerator knows how to load a checkpoint on the right device and dtype.
            loaded = HFGenerator(model_path, device=device, dtype=dtype)
            model, tokenizer = loaded.model, loaded.tokenizer
        self.model, self.tokenizer = model, tokenizer
        self.model.eval()
        self.device = next(model.parameters()).device
        self.batch_size = max(1, int(batch_size))
        self.prompt_cache = prompt_cache
        self.logit_positions = max(1, int(logit_positions))
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def score(self, prompt: str, candidates: Sequence[str],
              suffixes: Optional[Sequence[Sequence[int]]] = None) -> List[Score]:
        """The candidates' tokens after ``prompt`` (each tokenised on its own, as the agent saw
        the prompt and generated after it), plus per candidate the token ids in ``suffixes``
        (the stop token a sampled candidate ended on)."""
        prompt_ids = encode(self.tokenizer, prompt)
        if not prompt_ids:
            raise ValueError("cannot score a continuation of an empty prompt")
        suffixes = suffixes if suffixes is not None else [()] * len(candidates)
        rows = [
            prompt_ids + encode(self.tokenizer, c) + list(s) for c, s in zip(candidates, suffixes)
        ]
        return self.score_spans(rows, [len(prompt_ids)] * len(rows))

    def score_spans(self, rows: Sequence[Sequence[int]], starts: Sequence[int]) -> List[Score]:
        """(sum, count) of ``log p(row[t] | row[:t])`` for ``t`` in
        ``[max(start, 1), len(row))``."""
        import torch

        if not rows:
            return []
        with torch.no_grad():
            shared = common_prefix_length(rows)
            if self.prompt_cache and shared >= 2:
                return self._score_shared(rows, starts, shared)
            scores: List[Score] = []
            for begin in range(0, len(rows), self.batch_size):
                scores.extend(self._score_whole(rows[begin:begin + self.batch_size],
                                                starts[begin:begin + self.batch_size]))
            return scores

    # -- internals ---------------------------------------------------------------------------

    def _token_logps(self, hidden, targets):
        """log p(target) per position from final hidden states: hidden (B, T, H), targets (B, T)
        -> (B, T) float32, through the output layer a few positions at a time."""
        import torch

        if hidden.shape[1] == 0:  # no position to score (e.g. rows that end with the prefix)
            return hidden.new_zeros(targets.shape, dtype=torch.float32)
        head = self.model.get_output_embeddings()
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        step = max(1, self.logit_positions // max(1, hidden.shape[0]))
        out = []
        for t in range(0, hidden.shape[1], step):
            logits = head(hidden[:, t:t + step]).float()  # (B, c, V)
            if cap:  # Gemma-2 style soft-capping, as the model's own forward applies it
                logits = torch.tanh(logits / cap) * cap
            picked = logits.gather(-1, targets[:, t:t + step].unsqueeze(-1)).squeeze(-1)  # (B, c)
            out.append(picked - torch.logsumexp(logits, dim=-1))
        return torch.cat(out, dim=1)  # (B, T)

    def _hidden(self, ids, mask=None, past=None, use_cache: bool = False):
        """Final (normed) hidden states (B, T, H) and the cache (when ``use_cache``).

        The causal LM's own forward is ``output_layer(base_model(...))``; calling the two
        parts separately lets :meth:`_token_logps` apply the output layer piecewise.
        """
        out = self.model.base_model(input_ids=ids, attention_mask=mask, past_key_values=past,
                                    use_cache=use_cache)
        return out.last_hidden_state, out.past_key_values

    def _score_shared(self, rows, starts, shared: int) -> List[Score]:
        import torch

        prefix = torch.tensor([list(rows[0][:shared])], device=self.device)  # (1, L)
        hidden, cache = self._hidden(
            prefix[:, :-1], use_cache=True
        )  # (1, L-1, H): positions 0 .. L-2
        # log-probs of the prefix's own tokens at positions 1 .. L-1, once per turn
        prefix_logps = self._token_logps(hidden, prefix[:, 1:])[0].tolist()  # (L-1,)
        kv = cache_tensors(cache)  # per layer (1, H, L-1, D)
        del hidden, cache
        config = getattr(self.model, "config", None)
        scores: List[Score] = []
        for begin in range(0, len(rows), self.batch_size):
            chunk = [list(r[shared - 1:]) for r in rows[begin:begin + self.batch_size]]
            ids, mask = _pad(chunk, self.pad_id)  # (B, C+1): last prefix token + own tokens
            ids, mask = ids.to(self.device), mask.to(self.device)
            full_mask = torch.cat([mask.new_ones(len(chunk), shared - 1), mask], dim=1)  # (B, L+C)
            hidden, _ = self._hidden(ids, full_mask, expanded_cache(kv, len(chunk), config),
                                     use_cache=True)  # (B, C+1, H)
            logps = self._token_logps(hidden[:, :-1], ids[:, 1:])  # (B, C): positions L .. L+C-1
            for k, row_start in enumerate(starts[begin:begin + len(chunk)]):
                start = max(1, int(row_start))
                own = logps[k, :len(chunk[k]) - 1].tolist()
                head_sum, head_count = span_score(prefix_logps, 1, start)
                tail_sum, tail_count = span_score(own, shared, start)
                scores.append((head_sum + tail_sum, head_count + tail_count))
        return scores

    def _score_whole(self, rows, starts) -> List[Score]:
        ids, mask = _pad(rows, self.pad_id)  # (B, T)
        ids, mask = ids.to(self.device), mask.to(self.device)
        # Only the positions that predict span tokens need the output layer.
        first = max(1, min(int(s) for s in starts))
        hidden, _ = self._hidden(ids, mask)  # (B, T, H)
        logps = self._token_logps(hidden[:, first - 1:-1], ids[:, first:])  # (B, T-first)
        return [span_score(logps[k, :max(0, len(row) - first)].tolist(), first, max(1, int(s)))
                for k, (row, s) in enumerate(zip(rows, starts))]


def mean_of(score: Score) -> float:
    """Length-normalised log-prob; a span without tokens scores 0 (nothing to normalise)."""
    total, count = score
    return total / count if count else 0.0
