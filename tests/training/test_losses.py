"""Losses and log-probs against values worked out by hand (torchtune style)."""

import math

import pytest
import torch

from sweet_rl.training.losses import (bradley_terry_loss, dpo_loss, nll_loss, sequence_log_probs,
                                      token_log_probs, value_loss)


def test_dpo_loss_by_hand():
    """beta = 0.1; policy chosen -5, reference chosen -6; policy rejected -7, reference -6.

    chosen log-ratio   = -5 - (-6) = +1  -> chosen reward   = 0.1 * 1  = +0.1
    rejected log-ratio = -7 - (-6) = -1  -> rejected reward = 0.1 * -1 = -0.1
    loss = -log sigmoid(0.1 * (1 - (-1))) = -log sigmoid(0.2) = log(1 + e^-0.2)
         = log(1 + 0.8187307531) = log(1.8187307531) = 0.5981388694

    Second pair, beta = 0.5: policy chosen -2, ref chosen -1 (ratio -1); policy rejected -1,
    ref rejected -3 (ratio +2). loss = -log sigmoid(0.5 * (-1 - 2)) = log(1 + e^1.5)
         = log(1 + 4.4816890703) = log(5.4816890703) = 1.7014132780
    """
    losses, chosen, rejected = dpo_loss(torch.tensor([-5.0]), torch.tensor([-7.0]),
                                        torch.tensor([-6.0]), torch.tensor([-6.0]), beta=0.1)
    assert losses.item() == pytest.approx(0.5981388694, abs=1e-7)
    assert chosen.item() == pytest.approx(0.1) and rejected.item() == pytest.approx(-0.1)

    losses, chosen, rejected = dpo_loss(torch.tensor([-2.0]), torch.tensor([-1.0]),
                                        torch.tensor([-1.0]), torch.tensor([-3.0]), beta=0.5)
    assert losses.item() == pytest.approx(1.7014132780, abs=1e-7)
    assert chosen.item() == pytest.approx(-0.5) and rejected.item() == pytest.approx(1.0)


def test_dpo_loss_at_start_is_log_two_and_has_gradient():
    """Policy == reference: every log-ratio is 0, loss = -log sigmoid(0) = log 2 = 0.6931471806,
    and d loss / d policy_chosen = -beta * sigmoid(-0) = -beta / 2."""
    policy_chosen = torch.tensor([-3.0], requires_grad=True)
    losses, _, _ = dpo_loss(policy_chosen, torch.tensor([-4.0]), torch.tensor([-3.0]),
                            torch.tensor([-4.0]), beta=0.1)
    assert losses.item() == pytest.approx(math.log(2), abs=1e-7)
    losses.sum().backward()
    assert policy_chosen.grad.item() == pytest.approx(-0.05, abs=1e-7)


# One sequence of 6 scored tokens in two turns, one shorter sequence (padding) with one turn,
# one sequence with no trained token.
#   position     0   1   2   3   4   5
#   log-prob    -1  -2  -3  -4  -5  -6
#   turn         0   1   0   2   2   2
TOKEN_LOGPS = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0],
                            [-0.5, -1.5, -9.0, 0.0, 0.0, 0.0],
                            [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0]])
TURNS = torch.tensor([[0, 1, 0, 2, 2, 2],
                      [0, 1, 0, 0, 0, 0],
                      [0, 0, 0, 0, 0, 0]])


def test_sum_mean_and_per_turn_mean_on_a_two_turn_mask():
    """Row 0: trained tokens -2 (turn 1) and -4, -5, -6 (turn 2).

    sum           = -2 - 4 - 5 - 6                  = -17
    mean          = -17 / 4 tokens                  = -4.25   (the original's token mean)
    per-turn mean = (-2 / 1) + ((-4 - 5 - 6) / 3)    = -2 + -5 = -7  (the paper's form)
    Row 1: one trained token, -1.5, in every form (position 2's -9 is not trained).
    Row 2: no trained token: 0 in every form.
    """
    assert sequence_log_probs(TOKEN_LOGPS, TURNS, "sum").tolist() == [-17.0, -1.5, 0.0]
    assert sequence_log_probs(TOKEN_LOGPS, TURNS, "mean").tolist() == [-4.25, -1.5, 0.0]
    assert sequence_log_probs(TOKEN_LOGPS, TURNS, "per_turn_mean").tolist() == [-7.0, -1.5, 0.0]
    with pytest.raises(ValueError):
        sequence_log_probs(TOKEN_LOGPS, TURNS, "max")


@pytest.mark.parametrize("reduction", ["sum", "mean", "per_turn_mean"])
def test_reductions_are_linear(reduction):
    """reduce(policy) - reduce(reference) == reduce(policy - reference): storing the reduced
    reference score is enough (what reference.py relies on)."""
    generator = torch.Generator().manual_seed(0)
    policy = -torch.rand(3, 6, generator=generator, dtype=torch.float64)
    reference = -torch.rand(3, 6, generator=generator, dtype=torch.float64)
    left = sequence_log_probs(policy, TURNS, reduction) - sequence_log_probs(
        reference, TURNS, reduction
    )
    right = sequence_log_probs(policy - reference, TURNS, reduction)
    assert torch.allclose(left, right)


def test_token_log_probs_by_hand():
    """Vocabulary of 3, sequence [0, 2, 1].

    position 0 logits [0, 0, 0]    -> softmax [1/3, 1/3, 1/3]; token 2: log 1/3 = -1.0986122887
    position 1 logits [0, ln 2, 0] -> softmax [1/4, 1/2, 1/4]; token 1: log 1/2 = -0.6931471806
    position 2 logits (no next token) -> dropped by the shift
    turn ids shift with the labels: [0, 1, 1] -> [1, 1].
    """
    logits = torch.tensor([[[0.0, 0.0, 0.0], [0.0, math.log(2.0), 0.0], [5.0, 5.0, 5.0]]])
    logps, turns = token_log_probs(logits, torch.tensor([[0, 2, 1]]), torch.tensor([[0, 1, 1]]))
    assert logps.shape == (1, 2)
    assert logps[0].tolist() == pytest.approx([-1.0986122887, -0.6931471806], abs=1e-6)
    assert turns.tolist() == [[1, 1]]


def test_nll_is_the_mean_of_token_means():
    """Row 0 trains -1 and -3 (token mean -2); row 1 trains only -4 (mean -4).
    nll = -((-2) + (-4)) / 2 = 3."""
    logps = torch.tensor([[-1.0, -3.0], [-4.0, -2.0]])
    turns = torch.tensor([[1, 1], [1, 0]])
    assert nll_loss(logps, turns).item() == pytest.approx(3.0)


def test_bradley_terry_loss_by_hand():
    """loss = -log sigmoid(r_c - r_r) = log(1 + e^-(r_c - r_r)), per pair.

    pair 1: r_c = 0.5, r_r = 0.5   -> margin 0  -> log 2                   = 0.6931471806
    pair 2: r_c = 1.5, r_r = -0.5  -> margin 2  -> log(1 + e^-2)
                                                 = log(1.1353352832)    = 0.1269280110
    pair 3: r_c = -1,  r_r = 0     -> margin -1 -> log(1 + e^1)
                                                 = log(3.7182818285)    = 1.3132616875
    Gradient on pair 1's chosen score: d/d r_c log(1 + e^-(r_c - r_r)) = -sigmoid(-0) = -0.5,
    and +0.5 on its rejected score.
    """
    chosen = torch.tensor([0.5, 1.5, -1.0], requires_grad=True)
    rejected = torch.tensor([0.5, -0.5, 0.0], requires_grad=True)
    losses = bradley_terry_loss(chosen, rejected)
    assert losses.shape == (3,)
    assert losses.tolist() == pytest.approx([0.6931471806, 0.1269280110, 1.3132616875], abs=1e-6)
    losses[0].backward()
    assert chosen.grad.tolist() == pytest.approx([-0.5, 0.0, 0.0])
    assert rejected.grad.tolist() == pytest.approx([0.5, 0.0, 0.0])


def test_value_loss_by_hand():
    """Binary cross-entropy of a success logit z against the label y, per row:
    -log sigmoid(z) when y = 1, -log sigmoid(-z) = log(1 + e^z) when y = 0.

    z = 0,  y = 1 -> log 2                        = 0.6931471806
    z = 2,  y = 1 -> log(1 + e^-2)                 = 0.1269280110
    z = 2,  y = 0 -> log(1 + e^2) = log(8.3890561) = 2.1269280110 (confidently wrong)
    z = -3, y = 0 -> log(1 + e^-3)                 = 0.0485873516
    Gradient: d/dz = sigmoid(z) - y; for z = 2, y = 0 it is sigmoid(2) = 0.8807970780.
    """
    logits = torch.tensor([0.0, 2.0, 2.0, -3.0], requires_grad=True)
    labels = torch.tensor([1.0, 1.0, 0.0, 0.0])
    losses = value_loss(logits, labels)
    assert losses.shape == (4,)
    assert losses.tolist() == pytest.approx(
        [0.6931471806, 0.1269280110, 2.1269280110, 0.0485873516], abs=1e-6)
    losses[2].backward()
    assert logits.grad.tolist() == pytest.approx([0.0, 0.0, 0.8807970780, 0.0], abs=1e-6)
    # labels of another dtype (the collator's float32 against a bf16 score) are cast, not refused
    assert value_loss(torch.tensor([0.0]), torch.tensor([1])).item() == pytest.approx(0.6931472)
