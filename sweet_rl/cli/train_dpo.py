"""Stage: preference training -- the SWEET-RL critic, the agent's DPO, the multi-turn DPO baseline,
and the scalar-head critics the paper compares the SWEET-RL critic with (``--critic_head``).

Defaults come from ``--config`` (``configs/*.json``) and flags given here override them.
The logic is in :func:`sweet_rl.training.run.train_preference` (and ``train_scalar_critic``
for a scalar head); torch loads inside ``main``.
"""

from __future__ import annotations

from typing import Optional

from fire.decorators import SetParseFn

from sweet_rl.cli.helptext import add_args
from sweet_rl.training.options import SHARED_FLAG_HELP


# a wandb key or run name is text even when it looks like a number ("1e5", "0123")
@SetParseFn(str, "use_wandb", "wandb_run_name")
def main(pretrain: Optional[str] = None, ref_pretrain: Optional[str] = None,
         dataset: Optional[str] = None, save_path: Optional[str] = None,
         beta: Optional[float] = None, learning_rate: Optional[float] = None,
         max_epochs: Optional[float] = None, max_len: Optional[int] = None,
         train_batch_size: Optional[int] = None, micro_train_batch_size: Optional[int] = None,
         zero_stage: Optional[int] = None, bf16: Optional[bool] = None,
         gradient_checkpointing: Optional[bool] = None, flash_attn: Optional[bool] = None,
         response_template: Optional[str] = None, mean_log_prob: Optional[bool] = None,
         per_turn_mean: Optional[bool] = None, nll_loss_coef: Optional[float] = None,
         chosen_key: Optional[str] = None, rejected_key: Optional[str] = None,
         prompt_key: Optional[str] = None, seed: Optional[int] = None,
         lr_warmup_ratio: Optional[float] = None, min_lr_ratio: Optional[float] = None,
         logging_steps: Optional[int] = None, report_to: Optional[str] = None,
         save_steps: Optional[int] = None, weight_decay: Optional[float] = None,
         max_grad_norm: Optional[float] = None, deepspeed_config: Optional[str] = None,
         eval_steps: Optional[int] = None, eval_holdout: Optional[float] = None,
         use_wandb: Optional[str] = None,
         wandb_run_name: Optional[str] = None, ref_in_memory: Optional[bool] = None,
         critic_head: Optional[str] = None, config: Optional[str] = None, local_rank: int = -1):
    """Train a causal LM with DPO / Bradley-Terry on chosen/rejected pairs.

    Example (the SWEET-RL critic on backend pairs, 8 GPUs):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_backend.json \\
            --pretrain meta-llama/Llama-3.1-8B-Instruct --dataset outputs/critic_pairs.jsonl \\
            --save_path outputs/critic

    Example (tiny model, one CPU):
        python scripts/train_dpo.py --pretrain outputs/tiny-llama --dataset pairs.jsonl \\
            --save_path outputs/dpo --learning_rate 1e-3 --train_batch_size 2 --max_len 512

    Example (the paper's "w/ Regression Head" critic: the same critic pairs, a scalar head):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_backend.json \\
            --critic_head regression --pretrain meta-llama/Llama-3.1-8B-Instruct \\
            --dataset outputs/critic_pairs.jsonl --save_path outputs/critic_regression

    Example (the paper's frontend critic: a Qwen2-VL that sees the reference page, on the VLM
    critic pairs of evaluate_html.py --vlm_preference_path):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_frontend.json \
            --critic_head vlm_regression --pretrain Qwen/Qwen2-VL-7B-Instruct \
            --dataset outputs/vlm_critic_pairs.jsonl --save_path outputs/critic_vlm

    Example (the paper's "w/ Value Function" critic: evaluated trajectories, not pairs):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_backend.json \\
            --critic_head value --pretrain meta-llama/Llama-3.1-8B-Instruct \\
            --dataset outputs/trajectories_evaluated.jsonl --save_path outputs/critic_value

    Args (unset ones come from --config, then these defaults):
        pretrain: the model to train (path or hub id).
        ref_pretrain: a different reference model (default: pretrain). Reference log-probs
            are computed once, before training.
        dataset: JSONL of {"chosen", "rejected"} or {"prompt", "chosen", "rejected"};
            other key names via --chosen_key / --rejected_key / --prompt_key.
        beta: the DPO beta (the temperature of the preference loss).
        max_epochs: passes over the dataset (a fraction trains on part of one).
        max_len: the most tokens of a sequence; longer sequences lose tokens from the left,
            never the end of the final response.
        train_batch_size: pairs per optimizer step, = micro_train_batch_size x processes x
            gradient accumulation steps.
        micro_train_batch_size: pairs per forward pass on one process.
        response_template: e.g. "<|start_header_id|>assistant<|end_header_id|>": train on
            every assistant turn; without it, on the response after the prompt (the prompt key,
            else the longest common token prefix of chosen and rejected).
        mean_log_prob: length-normalise: token-mean log-prob over all trained tokens (the
            original code). Neither it nor --per_turn_mean: the sum (standard DPO).
        per_turn_mean: sum over turns of each turn's mean log-prob (the paper); overrides
            --mean_log_prob.
        nll_loss_coef: weight of the chosen responses' token-mean NLL added to the loss.
        chosen_key: the dataset key holding the preferred text.
        rejected_key: the dataset key holding the other text.
        prompt_key: the dataset key holding a shared prompt (rows without it have none).
        seed: the random seed of the run (data order, initialisation of a scalar head).
        ref_in_memory: keep a frozen reference model through training instead of computing
            reference log-probs once beforehand (for comparison).
        critic_head: "logprob": the model above, a causal LM scored by its log-probs.
            "regression": a linear head (hidden -> 1) on the mean of the agent's last hidden
            states, trained with -log sigmoid(r_chosen - r_rejected) on the same pairs.
            "value": the same head predicting success (reward >= 1.0) with a binary
            cross-entropy; --dataset is then an evaluated trajectory file and every assistant
            turn is one row: ground-truth prefix + its input + output. A head's weights are
            saved with the backbone (score_head.*) plus critic_head.json; load them with
            sweet_rl.training.heads.load_scalar_critic. "vlm_regression": the paper's frontend
            critic: --pretrain is a Qwen2-VL (Qwen/Qwen2-VL-7B-Instruct in the paper), the
            same head (without bias, as the training fork's) on the mean over every visual
            and text token, Bradley-Terry on --dataset's VLM critic pairs ({"chosen":
            {"image", "text"}, "rejected": {...}}, from evaluate_html.py
            --vlm_preference_path; pictures resized to at most 1280x28x28 pixels); the
            processor is saved with it; load it with
            sweet_rl.training.vlm_heads.load_vlm_critic. No reference model, beta or log-prob
            reduction applies to a head; --ref_pretrain, --ref_in_memory and
            --nll_loss_coef are refused with one.
        config: JSON file of defaults, e.g. configs/critic_backend.json.
    """
    explicit = dict(locals())
    from sweet_rl.training.config import build_options
    from sweet_rl.training.options import PreferenceOptions

    # checked here, before any work: a bad value or a missing wandb stops the run at once
    options = build_options(PreferenceOptions, explicit, config, "train_dpo", local_rank)
    from sweet_rl.training.run import train_preference, train_scalar_critic

    if options.critic_head == "logprob":
        train_preference(options)
    else:
        train_scalar_critic(options)


def help_defaults():
    """The flags' real defaults, which ``--help`` shows: the options' own (a None in the
    signature above means "not given", so that --config can tell what the command line set)."""
    from sweet_rl.training.options import PreferenceOptions

    return PreferenceOptions.flag_defaults()


main.help_defaults = help_defaults
# the flags train_sft describes in the same words: their text is written once, in the options
main.__doc__ = add_args(main.__doc__, SHARED_FLAG_HELP)
