"""Which tokens of the critic's text a candidate's score averages over (``--score_tokens``).

The critic reads ``context + candidate`` (context: ``input_with_ground_truth``, or ``input``
with ``--no_use_ground_truth``), tokenised as one string with the tokenizer's special tokens
added -- what vLLM does with a text prompt, so Llama-3.1 gets a BOS in front. The modes:

* ``original`` (default) -- every token after the first. The original asked vLLM 0.6.5 (the
  V0 engine its training fork pins) for the prompt log-probs of that text plus an assistant
  header, dropped the header's 4 positions, and averaged over the positions after the last
  decoded token equal to ``tokenizer.eos_token``. V0 decodes prompt tokens with
  ``skip_special_tokens=True`` (the SamplingParams default), which turns ``<|eot_id|>`` into
  "" -- it is never found, and the mean runs over every position that has a log-prob: all
  tokens but the first (the ground-truth prefix, the whole dialogue and the candidate).
* ``turn`` -- the tokens after the context's last eos id (``<|eot_id|>``): the assistant
  header of the generation prompt plus the candidate; what the same code averages over on
  vLLM >= 0.8 (V1 engine), whose decoded prompt tokens name special tokens. Without an eos
  in the context this falls back to ``original``'s span, as the original's search did.
* ``candidate`` -- the candidate's tokens only, the paper's description (per-turn
  log-prob of the action).

The candidate starts at the first token where ``context + candidate`` and ``context`` alone
tokenise differently; if the candidate's first characters merge with the context's last
token, that merged token counts as the candidate's.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

SCORE_TOKENS = ("original", "turn", "candidate")


def check_mode(mode: str) -> str:
    if mode not in SCORE_TOKENS:
        raise ValueError(f"--score_tokens must be one of {', '.join(SCORE_TOKENS)}; got {mode!r}")
    return mode


def tokenize_like_vllm(tokenizer, text: str) -> List[int]:
    """A text prompt as vLLM tokenises it: with the tokenizer's special tokens (BOS) added."""
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


def last_index(ids: Sequence[int], token_id, end: int) -> int:
    """Index of the last ``token_id`` in ``ids[:end]``, or -1."""
    for t in range(min(end, len(ids)) - 1, -1, -1):
        if ids[t] == token_id:
            return t
    return -1


def span_start(ids: Sequence[int], candidate_start: int, mode: str, eos_id) -> int:
    """First scored position of ``ids`` (position 0 never has a log-prob)."""
    if mode == "original":
        return 1
    if mode == "candidate":
        return max(1, candidate_start)
    return max(1, last_index(ids, eos_id, candidate_start) + 1)  # turn; -1 -> 1, as the original


def critic_rows(tokenizer, context: str, candidates: Sequence[str],
                mode: str) -> Tuple[List[List[int]], List[int]]:
    """Token rows of the critic's texts and the first scored position of each."""
    from sweet_rl.stepwise.scoring import common_prefix_length

    check_mode(mode)
    context_ids = tokenize_like_vllm(tokenizer, context)
    rows, starts = [], []
    for candidate in candidates:
        ids = tokenize_like_vllm(tokenizer, context + candidate)
        boundary = common_prefix_length([context_ids, ids])
        rows.append(ids)
        starts.append(span_start(ids, boundary, mode, tokenizer.eos_token_id))
    return rows, starts
