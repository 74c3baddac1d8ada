"""Reference log-probs, computed once before training.

DPO (Rafailov et al. 2023) compares the policy with a frozen reference pi_ref. Instead of
holding a second model through training (OpenRLHF's way), one pass of the reference model
(in eval mode, no gradients) scores every chosen and rejected sequence and the scores are
stored with the example; training then holds one model. Under ``torchrun``/``deepspeed``
each process scores its share (examples rank, rank + world, ...) and the shares are
all-gathered, so every process ends with every score.

The stored score uses the same reduction (sum, mean, per-turn mean) as the training loss;
because the reductions are linear, ``reduce(policy) - stored`` equals the reduced log-ratio.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Callable, Dict, List, Optional

import torch

from sweet_rl.training.losses import sequence_log_probs, token_log_probs

logger = logging.getLogger(__name__)


def score_batch(model, batch: Dict[str, torch.Tensor], reduction: str) -> torch.Tensor:
    """Forward ``batch`` (input_ids, attention_mask, turn_ids: (N, T)); return scores (N,)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   use_cache=False).logits  # (N, T, V)
    token_logps, turns = token_log_probs(logits, batch["input_ids"], batch["turn_ids"])  # (N, T-1)
    return sequence_log_probs(token_logps, turns, reduction)  # (N,)


def precompute_reference_logps(model, examples: List[dict], collator: Callable,
                               reduction: str, batch_size: int = 1,
                               device: Optional[torch.device] = None, rank: int = 0,
                               world_size: int = 1,
                               autocast_dtype: Optional[torch.dtype] = None) -> List[dict]:
    """Add ``ref_chosen_logp`` and ``ref_rejected_logp`` (floats) to every example, in place.

    ``examples`` are the dicts the :class:`~sweet_rl.training.collators.PreferenceCollator`
    takes. ``autocast_dtype`` (e.g. bfloat16) matches a mixed-precision training forward.
    """
    from tqdm import tqdm

    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    mine = list(range(rank, len(examples), world_size))
    scores: Dict[int, tuple] = {}
    autocast = (torch.autocast(device_type=device.type, dtype=autocast_dtype)
                if autocast_dtype is not None else contextlib.nullcontext())
    starts = range(0, len(mine), batch_size)
    with torch.no_grad(), autocast:
        for start in tqdm(starts, desc="reference log-probs", disable=rank != 0):
            idx = mine[start:start + batch_size]
            batch = collator([{"chosen": examples[i]["chosen"], "rejected": examples[i]["rejected"]}
                              for i in idx])
            batch = {k: v.to(device) for k, v in batch.items()}
            values = score_batch(model, batch, reduction).float().cpu()  # (2B,)
            for j, i in enumerate(idx):
                scores[i] = (values[j].item(), values[len(idx) + j].item())
    if world_size > 1:
        import torch.distributed as dist

        gathered: List[Optional[Dict[int, tuple]]] = [None] * world_size
        dist.all_gather_object(gathered, scores)
        scores = {i: v for part in gathered for i, v in (part or {}).items()}
    for i, example in enumerate(examples):
        example["ref_chosen_logp"], example["ref_rejected_logp"] = scores[i]
    model.train(was_training)
    logger.info("reference log-probs computed for %d pairs (%s)", len(examples), reduction)
    return examples
