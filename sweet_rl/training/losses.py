"""Losses for preference training (torch only, no model or Trainer code).

* DPO (Rafailov et al. 2023, "Direct Preference Optimization", Eq. 7): with sequence scores
  s = log pi(y|x) under the policy and s_ref under the frozen reference,
  ``loss = -log sigmoid(beta * ((s_c - s_ref_c) - (s_r - s_ref_r)))``. With beta-scaled
  log-ratios as rewards this is the Bradley-Terry likelihood the SWEET-RL critic is trained
  with (Zhou et al. 2025, Section 4).
* How a sequence is scored (``reduction``):
  - ``"sum"``: sum of the log-probs of the trained tokens (standard DPO);
  - ``"mean"``: their mean over all trained tokens of the sequence -- length normalisation;
    the original code's critic loss (one token-mean over every assistant token of the
    trajectory). The paper's critic ablation: summing instead collapses the trained
    agent (4.2% vs 56.8% backend tests passed);
  - ``"per_turn_mean"``: sum over turns of each turn's mean log-prob -- the paper's form
    (advantage of a turn = mean log-prob ratio of its tokens; trajectory = sum of turns).
  Reductions are linear in the token log-probs, so reducing the policy and the reference
  separately and subtracting equals reducing the per-token log-ratio.
* NLL on the chosen responses (OpenRLHF's ``nll_loss_coef``): mean over chosen sequences of
  their token-mean negative log-likelihood.
* Scalar-head critics (:mod:`sweet_rl.training.heads`): the Bradley-Terry loss on two scores
  and the binary cross-entropy of a success logit (the paper's regression-head and
  value-function ablations).
"""

from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F

REDUCTIONS = ("sum", "mean", "per_turn_mean")


def token_log_probs(logits: torch.Tensor, input_ids: torch.Tensor,
                    turn_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each next token, shifted so position t scores token t+1.

    Args: logits (N, T, V), input_ids (N, T), turn_ids (N, T).
    Returns: token log-probs (N, T-1) and the matching turn ids (N, T-1).
    Row by row, so only one (T, V) float32 copy of the logits lives at a time.
    """
    labels = input_ids[:, 1:]  # (N, T-1)
    rows = []
    for n in range(logits.shape[0]):
        row = logits[n, :-1].float()  # (T-1, V)
        picked = row.gather(-1, labels[n].unsqueeze(-1)).squeeze(-1)  # (T-1,)
        rows.append(picked - torch.logsumexp(row, dim=-1))  # (T-1,)
    return torch.stack(rows), turn_ids[:, 1:]


def sequence_log_probs(token_logps: torch.Tensor, turn_ids: torch.Tensor,
                       reduction: str = "sum") -> torch.Tensor:
    """Reduce token log-probs (N, L) to one score per sequence (N,).

    ``turn_ids`` (N, L): k >= 1 marks tokens of turn k, 0 tokens outside the loss. A sequence
    without trained tokens scores 0.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    mask = (turn_ids > 0).to(token_logps.dtype)  # (N, L)
    masked = token_logps * mask  # (N, L)
    if reduction == "sum":
        return masked.sum(-1)  # (N,)
    if reduction == "mean":
        return masked.sum(-1) / mask.sum(-1).clamp(min=1)  # (N,)
    num_turns = int(turn_ids.max().item()) + 1 if turn_ids.numel() else 1
    index = turn_ids.long()  # (N, L); bucket 0 gathers the untrained tokens
    sums = token_logps.new_zeros(turn_ids.shape[0], num_turns).scatter_add(
        1, index, masked
    )  # (N, K+1)
    counts = token_logps.new_zeros(turn_ids.shape[0], num_turns).scatter_add(
        1, index, mask
    )  # (N, K+1)
    means = sums[:, 1:] / counts[:, 1:].clamp(min=1)  # (N, K); empty turns give 0
    return means.sum(-1)  # (N,)


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
             ref_chosen: torch.Tensor, ref_rejected: torch.Tensor,
             beta: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-pair DPO loss and the implicit rewards.

    All inputs (B,). Returns ``losses`` (B,) = -log sigmoid(r_c - r_r), ``chosen_rewards``
    r_c = beta (pi_c - ref_c) (B,) and ``rejected_rewards`` r_r (B,), rewards detached.
    """
    chosen_ratio = policy_chosen - ref_chosen  # (B,)
    rejected_ratio = policy_rejected - ref_rejected  # (B,)
    losses = -F.logsigmoid(beta * (chosen_ratio - rejected_ratio))  # (B,)
    return losses, beta * chosen_ratio.detach(), beta * rejected_ratio.detach()


def nll_loss(token_logps: torch.Tensor, turn_ids: torch.Tensor) -> torch.Tensor:
    """Scalar: mean over sequences of the token-mean negative log-likelihood of trained tokens.

    token_logps, turn_ids: (N, L).
    """
    return -sequence_log_probs(token_logps, turn_ids, "mean").mean()


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Per-pair Bradley-Terry loss of two scalar scores, chosen (B,) and rejected (B,) -> (B,).

    Bradley-Terry models the chance that the chosen side wins as
    ``P = exp(r_c) / (exp(r_c) + exp(r_r)) = sigmoid(r_c - r_r)``; the loss is its negative
    log-likelihood, ``-log sigmoid(r_c - r_r) = log(1 + exp(-(r_c - r_r)))``. Only the margin
    counts: log 2 when the scores are equal, towards 0 as the chosen side pulls ahead. It is
    :func:`dpo_loss` with the rewards given directly instead of as beta-scaled log-ratios.
    """
    return -F.logsigmoid(chosen - rejected)  # (B,)


def value_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-row binary cross-entropy of a success logit (B,) against a 0/1 label (B,) -> (B,).

    With ``p = sigmoid(z)`` the predicted chance of success,
    ``-(y log p + (1 - y) log(1 - p))``; since ``1 - sigmoid(z) = sigmoid(-z)`` this is
    ``-log sigmoid(z)`` for a success and ``-log sigmoid(-z)`` for a failure, which
    ``binary_cross_entropy_with_logits`` evaluates without forming ``p`` (no overflow).
    """
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype),
                                              reduction="none")  # (B,)
