"""Stages: preference training (train_dpo) and rejection fine-tuning (train_sft).

The options are :mod:`sweet_rl.training.options` (defaults < ``--config`` file < flags); the
logic is in :mod:`sweet_rl.training.run`, which imports torch only when a run starts.
"""

from __future__ import annotations

from sweet_rl.training.options import PreferenceOptions, SFTOptions


def train_dpo(opts: PreferenceOptions) -> None:
    """The critic, the agent's DPO or the multi-turn DPO baseline (a log-prob model), or a
    scalar-head critic (--critic_head regression, value, vlm_regression)."""
    from sweet_rl.training.config import apply_original_flags
    from sweet_rl.training.run import train_preference, train_scalar_critic

    # a missing wandb stops the run here, before any data or model is read
    opts = apply_original_flags(opts, "train_dpo")
    if opts.critic_head == "logprob":
        train_preference(opts)
    else:
        train_scalar_critic(opts)


def train_sft(opts: SFTOptions) -> None:
    """Fine-tune on the successful trajectories (reward >= --min_reward)."""
    from sweet_rl.training.config import apply_original_flags
    from sweet_rl.training.run import train_sft as run_sft

    run_sft(apply_original_flags(opts, "train_sft"))
