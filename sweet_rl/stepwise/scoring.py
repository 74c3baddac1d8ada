"""Log-probs of candidate continuations of one shared prompt, with transformers.

Both the reference log-probs (sample stage, with the sampling model) and the critic's scores
(rank stage) are the log-probs of each candidate's tokens given a prompt that is the same for
all N candidates of a turn. Texts are tokenised separately -- ``ids(prompt) + ids(candidate)``
-- as the agent saw the prompt and generated after it; the candidate is scored without an
end-of-turn token (its text is decoded without special tokens).

With ``prompt_cache`` (the default) the prompt is run through the model once and its KV cache
is expanded over a batch of candidates, so a ~1000-token prompt costs one prompt pass instead
of N. The cache holds the prompt minus its last token: that token is fed again at the head of
every continuation, so the continuation's logits score its first token too and no logits of the
long prompt are ever materialised. Without it each candidate is scored with the full prompt
(a cross-check and the benchmark's baseline); both give the same numbers up to float rounding.
"""

from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Tuple

logger = logging.getLogger(__name__)

Score = Tuple[float, int]  # (sum of token log-probs, number of tokens)


def encode(tokenizer, text: str) -> List[int]:
    """Chat-formatted text already carries ``<|begin_of_text|>``: add no special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def cache_tensors(cache) -> List[Tuple["object", "object"]]:
    """(keys, values) per layer, each (1, heads, P, head_dim), from a transformers cache.

    transformers >= 4.56 keeps them in ``cache.layers[i].keys/.values``; older versions in
    ``key_cache``/``value_cache``; very old ones return tuples.
    """
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def expanded_cache(kv, batch: int, config=None):
    """A fresh DynamicCache whose every row is the prompt's cache.

    A DynamicCache is mutated by each forward (new keys are concatenated onto it), so the
    prompt's own cache is never handed to the model twice: each chunk of candidates gets a new
    cache built from broadcast views (``expand`` copies nothing; the first update does).
    """
    from transformers import DynamicCache

    data = [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in kv]  # (B, H, P-1, D)
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


class ContinuationScorer:
    """Scores candidates under one causal LM; ``score(prompt, candidates)`` -> [(sum, count)].

    ``batch_size`` candidates go through one forward pass (the cache is expanded to that many
    rows). ``dtype`` as in :class:`~sweet_rl.hf_generation.HFGenerator`.
    """

    def __init__(self, model_path: Optional[str] = None, device: Optional[str] = None,
                 dtype: str = "auto", batch_size: int = 16, prompt_cache: bool = True,
                 model=None, tokenizer=None):
        from sweet_rl.hf_generation import HFGenerator

        if model is None or tokenizer is None:
            # HFGenerator knows how to load a checkpoint on the right device and dtype.
            loaded = HFGenerator(model_path, device=device, dtype=dtype)
            model, tokenizer = loaded.model, loaded.tokenizer
        self.model, self.tokenizer = model, tokenizer
        self.model.eval()
        self.device = next(model.parameters()).device
        self.batch_size = max(1, int(batch_size))
        self.prompt_cache = prompt_cache
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def score(self, prompt: str, candidates: Sequence[str]) -> List[Score]:
        import torch

        prompt_ids = encode(self.tokenizer, prompt)
        cand_ids = [encode(self.tokenizer, c) for c in candidates]
        if not prompt_ids:
            raise ValueError("cannot score a continuation of an empty prompt")
        scores: List[Score] = []
        with torch.no_grad():
            kv = self._prompt_kv(prompt_ids) if self.prompt_cache else None
            for start in range(0, len(cand_ids), self.batch_size):
                chunk = cand_ids[start:start + self.batch_size]
                if kv is None:
                    scores.extend(self._score_full(prompt_ids, chunk))
                else:
                    scores.extend(self._score_cached(prompt_ids[-1], kv, chunk))
        return scores

    def _prompt_kv(self, prompt_ids: List[int]):
        """KV cache of the prompt without its last token, or None for a one-token prompt."""
        import torch

        if len(prompt_ids) < 2:
            return None
        ids = torch.tensor([prompt_ids[:-1]], device=self.device)  # (1, P-1)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        return cache_tensors(out.past_key_values)  # per layer (1, H, P-1, D)

    def _score_cached(self, last_prompt_id: int, kv, chunk: List[List[int]]) -> List[Score]:
        import torch

        rows = [[last_prompt_id] + c for c in chunk]
        ids, mask = _pad(rows, self.pad_id)  # (B, C+1)
        ids, mask = ids.to(self.device), mask.to(self.device)
        past = kv[0][0].shape[2]  # P-1
        full_mask = torch.cat([mask.new_ones(len(rows), past), mask], dim=1)  # (B, P+C)
        cache = expanded_cache(kv, len(rows), getattr(self.model, "config", None))
        logits = self.model(input_ids=ids, attention_mask=full_mask, past_key_values=cache,
                            use_cache=True).logits  # (B, C+1, V)
        return self._reduce(logits, ids, mask)

    def _score_full(self, prompt_ids: List[int], chunk: List[List[int]]) -> List[Score]:
        rows = [prompt_ids + c for c in chunk]
        ids, mask = _pad(rows, self.pad_id)  # (B, P+C)
        ids, mask = ids.to(self.device), mask.to(self.device)
        width = ids.shape[1] - len(prompt_ids) + 1  # C+1: last prompt token + candidate slots
        # Only the positions that predict candidate tokens need logits (the prompt's are waste).
        logits = self.model(input_ids=ids, attention_mask=mask, use_cache=False,
                            logits_to_keep=width).logits  # (B, C+1, V)
        tail = slice(len(prompt_ids) - 1, None)
        return self._reduce(logits, ids[:, tail], mask[:, tail])

    @staticmethod
    def _reduce(logits, ids, mask) -> List[Score]:
        """Rows start with the last prompt token: ids/mask (B, C+1), logits (B, C+1, V)."""
        from sweet_rl.training.losses import sequence_log_probs, token_log_probs

        turn = mask.clone()
        turn[:, 0] = 0  # the prompt token is context, not part of the candidate
        token_logps, turns = token_log_probs(logits, ids, turn)  # (B, C)
        sums = sequence_log_probs(token_logps, turns, "sum")  # (B,)
        counts = (turns > 0).sum(-1)  # (B,)
        return [(float(s), int(n)) for s, n in zip(sums.tolist(), counts.tolist())]


def mean_of(score: Score) -> float:
    """Length-normalised log-prob; a candidate without tokens scores 0 (nothing to normalise)."""
    total, count = score
    return total / count if count else 0.0
