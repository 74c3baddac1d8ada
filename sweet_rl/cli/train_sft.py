"""Stage: supervised fine-tuning on successful trajectories (the rejection fine-tuning baseline).

Keeps the trajectories with ``reward >= min_reward`` and trains on the agent's turns of the
whole chat-formatted dialogue (``response_template`` masking, shared with train_dpo).
The logic is in :func:`sweet_rl.training.run.train_sft`; torch loads inside ``main``.
"""

from __future__ import annotations

from typing import Optional

from fire.decorators import SetParseFn

from sweet_rl.cli.helptext import add_args
from sweet_rl.training.options import SHARED_FLAG_HELP


# a wandb key or run name is text even when it looks like a number ("1e5", "0123")
@SetParseFn(str, "use_wandb", "wandb_run_name")
def main(pretrain: Optional[str] = None, dataset: Optional[str] = None,
         save_path: Optional[str] = None, min_reward: Optional[float] = None,
         learning_rate: Optional[float] = None, max_epochs: Optional[float] = None,
         max_len: Optional[int] = None, train_batch_size: Optional[int] = None,
         micro_train_batch_size: Optional[int] = None, zero_stage: Optional[int] = None,
         bf16: Optional[bool] = None, gradient_checkpointing: Optional[bool] = None,
         flash_attn: Optional[bool] = None, response_template: Optional[str] = None,
         seed: Optional[int] = None, lr_warmup_ratio: Optional[float] = None,
         min_lr_ratio: Optional[float] = None, logging_steps: Optional[int] = None,
         report_to: Optional[str] = None, save_steps: Optional[int] = None,
         weight_decay: Optional[float] = None, max_grad_norm: Optional[float] = None,
         deepspeed_config: Optional[str] = None, eval_steps: Optional[int] = None,
         eval_holdout: Optional[float] = None,
         use_wandb: Optional[str] = None, wandb_run_name: Optional[str] = None,
         config: Optional[str] = None, local_rank: int = -1):
    """Fine-tune on the successful trajectories of an evaluated trajectory JSONL.

    Example (8 GPUs, paper-scale settings):
        deepspeed --num_gpus 8 scripts/train_sft.py --config configs/rft_backend.json \\
            --pretrain meta-llama/Llama-3.1-8B-Instruct --dataset outputs/train_eval.jsonl \\
            --save_path outputs/rft

    Args (unset ones come from --config, then these defaults):
        pretrain: the model to fine-tune (path or hub id).
        dataset: trajectories with "reward" (evaluate's output).
        min_reward: keep the rows whose reward is at least this (1.0: all hidden tests passed).
        max_epochs: passes over the kept rows (a fraction trains on part of one).
        max_len: the most tokens of a sequence; longer ones lose tokens from the left.
        train_batch_size: rows per optimizer step, = micro_train_batch_size x processes x
            gradient accumulation steps.
        micro_train_batch_size: rows per forward pass on one process.
        response_template: the marker of the agent's turns, which are the tokens trained on
            ("" trains on every token).
        seed: the random seed of the run (data order).
        config: JSON file of defaults, e.g. configs/rft_backend.json.
    """
    explicit = dict(locals())
    from sweet_rl.training.config import build_options
    from sweet_rl.training.options import SFTOptions

    # checked here, before any work: a bad value or a missing wandb stops the run at once
    options = build_options(SFTOptions, explicit, config, "train_sft", local_rank)
    from sweet_rl.training.run import train_sft

    train_sft(options)


def help_defaults():
    """The flags' real defaults, which ``--help`` shows: the options' own (a None in the
    signature above means "not given", so that --config can tell what the command line set)."""
    from sweet_rl.training.options import SFTOptions

    return SFTOptions.flag_defaults()


main.help_defaults = help_defaults
# the flags train_dpo describes in the same words: their text is written once, in the options
main.__doc__ = add_args(main.__doc__, SHARED_FLAG_HELP)
