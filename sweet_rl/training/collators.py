"""Tokenisation, loss masks and collators for preference (DPO / critic) and SFT training.

Every tokenised sequence is a pair of equal-length lists: ``input_ids`` and ``turn_ids``.
``turn_ids[t] = k >= 1`` when token t belongs to the k-th trained response (it is scored by
the loss as log p(x_t | x_<t)), 0 when it is context. The loss mask is ``turn_ids > 0``;
the turn index gives the paper's per-turn mean (SWEET-RL, Zhou et al. 2025, Section 4: a
turn's advantage is its length-normalised log-prob ratio).

Which tokens are trained:

* with a ``response_template`` (e.g. ``<|start_header_id|>assistant<|end_header_id|>``):
  every assistant turn -- from the token after each occurrence of the template up to and
  including the next end-of-turn token (``tokenizer.eos_token``, ``<|eot_id|>`` for Llama-3),
  or to the end of the sequence when the turn has none (the original's critic pairs end
  with the raw generation, without ``<|eot_id|>``). Matching is on token ids, so the template
  must tokenise the same alone and in context (true for special-token headers).
* without one: the response after the prompt. The prompt is the record's ``prompt`` text when
  the file has one (prompt and response are tokenised separately and concatenated, as the
  agent saw the prompt and generated the response); otherwise it is the longest common prefix
  of the chosen and rejected token ids, kept one token shorter than the shorter side so each
  side trains on at least one token.
* with both a prompt and a template: the template's turns, restricted to the response.

Texts are tokenised with ``add_special_tokens=False``: chat-formatted text already carries
``<|begin_of_text|>``.

Truncation to ``max_len`` (OpenRLHF-style left truncation, never the final response): the
sequence keeps its first token when that is the BOS token, then the last ``max_len - 1``
tokens (``max_len`` when there is no BOS). Context and earlier turns go first. When the final
response alone is longer than that, its beginning is cut too -- its end (with the
end-of-turn token) always survives -- and a warning is logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch

logger = logging.getLogger(__name__)


def find_all(ids: Sequence[int], pattern: Sequence[int]) -> List[int]:
    """Start positions of every (non-overlapping) occurrence of ``pattern`` in ``ids``."""
    starts, n, m, i = [], len(ids), len(pattern), 0
    while m and i + m <= n:
        if list(ids[i:i + m]) == list(pattern):
            starts.append(i)
            i += m
        else:
            i += 1
    return starts


def template_turn_ids(ids: Sequence[int], template: Sequence[int], end_id: int) -> List[int]:
    """Turn index per token: k for the tokens of the k-th templated turn, 0 elsewhere.

    A turn runs from just after the template to the first ``end_id`` inclusive (or the end).
    """
    turns = [0] * len(ids)
    for k, start in enumerate(find_all(ids, template), start=1):
        t = start + len(template)
        while t < len(ids):
            turns[t] = k
            if ids[t] == end_id:
                break
            t += 1
    return turns


def truncate_left(ids: List[int], turns: List[int], max_len: int,
                  bos_id: Optional[int]) -> Tuple[List[int], List[int], bool]:
    """Cut from the left to ``max_len`` tokens, keeping a leading BOS.

    Returns the new ids, turn ids and whether any of the final response was lost.
    """
    if len(ids) <= max_len:
        return ids, turns, False
    keep_bos = bos_id is not None and ids and ids[0] == bos_id and max_len > 1
    tail = max_len - 1 if keep_bos else max_len
    cut = len(ids) - tail  # first kept position of the tail
    last_turn = max(turns) if turns else 0
    first_final = turns.index(last_turn) if last_turn else len(ids)
    lost_response = last_turn > 0 and cut > first_final
    new_ids, new_turns = ids[cut:], turns[cut:]
    if keep_bos:
        new_ids, new_turns = [ids[0]] + new_ids, [0] + new_turns
    return new_ids, new_turns, lost_response


@dataclass
class Tokenized:
    input_ids: List[int]
    turn_ids: List[int]

    @property
    def num_loss_tokens(self) -> int:
        return sum(1 for k in self.turn_ids if k > 0)


class SequenceTokenizer:
    """Turns texts into :class:`Tokenized` sequences with the rules of the module docstring."""

    def __init__(self, tokenizer, max_len: int, response_template: Optional[str] = None):
        self.tokenizer = tokenizer
        self.max_len = int(max_len)
        self.end_id = tokenizer.eos_token_id
        self.bos_id = tokenizer.bos_token_id
        self.template = None
        if response_template:
            self.template = self.encode(response_template)
            if not self.template:
                raise ValueError("response_template tokenises to nothing")
        self.lost_responses = 0  # sequences whose final response was cut by max_len

    def encode(self, text: str) -> List[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _finish(self, ids: List[int], turns: List[int]) -> Tokenized:
        ids, turns, lost = truncate_left(ids, turns, self.max_len, self.bos_id)
        if lost:
            self.lost_responses += 1
            logger.warning("a final response is longer than max_len=%d; its beginning is cut",
                           self.max_len)
        return Tokenized(ids, turns)

    def _turns(self, ids: List[int], response_start: int) -> List[int]:
        if self.template is None:
            return [0] * response_start + [1] * (len(ids) - response_start)
        turns = template_turn_ids(ids, self.template, self.end_id)
        return [0 if t < response_start else k for t, k in enumerate(turns)]

    def single(self, text: str, prompt: Optional[str] = None) -> Tokenized:
        """One sequence (SFT). Trained tokens: template turns, else the response after
        ``prompt``, else (no template, no prompt) every token."""
        prompt_ids = self.encode(prompt) if prompt else []
        ids = prompt_ids + self.encode(text)
        return self._finish(ids, self._turns(ids, len(prompt_ids)))

    def pair(self, chosen: str, rejected: str,
             prompt: Optional[str] = None) -> Tuple[Tokenized, Tokenized]:
        """A preference pair; ``prompt`` (if any) is prepended to both sides."""
        if prompt is not None:
            prompt_ids = self.encode(prompt)
            c_ids, r_ids = prompt_ids + self.encode(chosen), prompt_ids + self.encode(rejected)
            start_c = start_r = len(prompt_ids)
        else:
            c_ids, r_ids = self.encode(chosen), self.encode(rejected)
            if self.template is not None:
                start_c = start_r = 0
            else:
                start_c = start_r = common_prefix_length(c_ids, r_ids)
        return (self._finish(c_ids, self._turns(c_ids, start_c)),
                self._finish(r_ids, self._turns(r_ids, start_r)))


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix, capped so both sides keep >= 1 token after it."""
    limit = max(0, min(len(a), len(b)) - 1)
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def _pad(rows: List[List[int]], value: int, length: int) -> torch.Tensor:
    return torch.tensor([row + [value] * (length - len(row)) for row in rows], dtype=torch.long)


def pad_batch(sequences: List[Tokenized], pad_id: int) -> Dict[str, torch.Tensor]:
    """Right-pad to the longest sequence.

    Returns ``input_ids`` (N, T) padded with ``pad_id``, ``attention_mask`` (N, T) 1 on real
    tokens, ``turn_ids`` (N, T) 0 on padding and ``loss_mask`` (N, T) = ``turn_ids > 0``.
    """
    length = max(len(s.input_ids) for s in sequences)
    input_ids = _pad([s.input_ids for s in sequences], pad_id, length)  # (N, T)
    attention_mask = _pad([[1] * len(s.input_ids) for s in sequences], 0, length)  # (N, T)
    turn_ids = _pad([s.turn_ids for s in sequences], 0, length)  # (N, T)
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "turn_ids": turn_ids, "loss_mask": (turn_ids > 0).long()}


class PreferenceCollator:
    """Stacks B pairs into one batch of 2B rows: chosen rows 0..B-1, rejected rows B..2B-1.

    One forward pass scores both sides (one parameter gather per step under ZeRO-3).
    For two pairs whose sides have 3, 5 (chosen) and 4, 2 (rejected) tokens, pad id 9::

        input_ids      = [[c00 c01 c02  9   9 ],     attention_mask = [[1 1 1 0 0],
                          [c10 c11 c12 c13 c14],                       [1 1 1 1 1],
                          [r00 r01 r02 r03  9 ],                       [1 1 1 1 0],
                          [r10 r11  9   9   9 ]]                       [1 1 0 0 0]]

    ``turn_ids``/``loss_mask`` are padded with 0. When the examples carry precomputed
    reference values, ``ref_logps`` (2B,) follows the same row order.
    """

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, examples: List[dict]) -> Dict[str, torch.Tensor]:
        rows = [e["chosen"] for e in examples] + [e["rejected"] for e in examples]
        batch = pad_batch(rows, self.pad_id)
        if all("ref_chosen_logp" in e for e in examples):
            ref = [e["ref_chosen_logp"] for e in examples] + [
                e["ref_rejected_logp"] for e in examples
            ]
            batch["ref_logps"] = torch.tensor(ref, dtype=torch.float32)  # (2B,)
        return batch


class SFTCollator:
    """Right-pads single sequences into ``input_ids``, ``attention_mask`` and ``labels`` (N, T):
    the ids with -100 wherever the loss mask is 0 (context and padding), so the model's own
    shifted cross-entropy, averaged over trained tokens across accumulation steps, applies."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, examples: List[dict]) -> Dict[str, torch.Tensor]:
        batch = pad_batch([e["sequence"] for e in examples], self.pad_id)
        labels = batch["input_ids"].masked_fill(batch["loss_mask"] == 0, -100)  # (N, T)
        # only what the model's forward takes: the Trainer passes the batch as keywords
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
                "labels": labels}
