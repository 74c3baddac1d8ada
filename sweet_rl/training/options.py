"""The options of one training run: each flag one field, with its help and its default.

The command line, a ``configs/*.json`` file (``--config``; the flags given win over it) and
these defaults give the values, read by :mod:`sweet_rl.flags` and checked here, so the training
code reads ``options.max_len`` as an int and a bad value fails at once with the flag's name,
before any data or model is read. ``dataclasses.asdict`` of the options is what the run's
``training.config.json`` sidecar records.

No torch import here, so ``--help`` and config checks stay instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Union

from sweet_rl.flags import Options, flag

# --critic_head: the log-prob critic (SWEET-RL), the two scalar heads it is compared with, and
# the frontend's vision-language critic (a scalar head on a Qwen2-VL that sees the reference)
CRITIC_HEADS = ("logprob", "regression", "value", "vlm_regression")


def _unit_interval(flag_name: str, value: float) -> None:
    if not 0 <= value < 1:
        raise ValueError(f"--{flag_name} must be in [0, 1), got {value}")


@dataclass(frozen=True, kw_only=True)
class TrainingOptions(Options):
    """Training: the flags train_dpo and train_sft share."""

    pretrain: Optional[str] = flag("the model to train (path or hub id); required.", None)
    save_path: Optional[str] = flag(
        "output directory (HF model + tokenizer, metrics.jsonl); required.", None)
    learning_rate: float = flag("the peak learning rate.", 2e-7)
    max_epochs: float = flag("passes over the data (a fraction trains on part of one).", 1)
    max_len: int = flag(
        "the most tokens of a sequence; longer sequences lose tokens from the left, never the "
        "end of the final response.", 8192)
    train_batch_size: int = flag(
        "examples per optimizer step, = micro_train_batch_size x processes x gradient "
        "accumulation steps.", 8)
    micro_train_batch_size: int = flag("examples per forward pass on one process.", 1)
    # 0..3 is checked only when DeepSpeed is used: outside the launcher the flag is ignored
    zero_stage: int = flag(
        "0 = no DeepSpeed; 1, 2 or 3: DeepSpeed ZeRO under the deepspeed launcher "
        "(configs/ds_zero*.json or --deepspeed_config); ignored without the launcher.", 0)
    bf16: bool = flag("train in bfloat16 (mixed precision).", False)
    gradient_checkpointing: bool = flag(
        "recompute activations in the backward pass (less memory).", False)
    flash_attn: bool = flag(
        "use flash_attention_2 when the flash_attn package is installed (sdpa attention "
        "otherwise).", False)
    seed: int = flag(
        "the random seed of the run (data order; the initialisation of a scalar head).", 42)
    lr_warmup_ratio: float = flag(
        "share of the steps spent warming the learning rate up (cosine schedule).", 0.03)
    min_lr_ratio: float = flag("the cosine schedule's floor, as a share of --learning_rate.",
                               0.1)
    logging_steps: int = flag("optimizer steps between two lines of metrics.jsonl.", 1)
    report_to: List[str] = flag(
        "where the Trainer also reports: none, wandb, tensorboard (comma-separated).",
        ["none"])
    save_steps: int = flag(
        "optimizer steps between two checkpoints (-1: the final model only).", -1)
    weight_decay: float = flag("AdamW's weight decay.", 0.0)
    max_grad_norm: float = flag("gradients are clipped to this norm.", 1.0)
    deepspeed_config: Optional[str] = flag(
        "a DeepSpeed JSON file instead of configs/ds_zero{2,3}.json.", None)
    eval_steps: Optional[int] = flag(
        "accepted for the original's commands; the held-out share is not evaluated.", None)
    # the original's openrlhf fork keeps the first 3% of --dataset out of training (its eval
    # split); published numbers were trained on the other 97%
    eval_holdout: float = flag(
        "the first share of --dataset kept out of training, as the original's openrlhf fork "
        "kept its first 3% as an evaluation split (0: train on all).", 0.03)
    # the wandb key or True before config.apply_original_flags, True or None after it
    use_wandb: Union[str, bool, None] = flag(
        "log to Weights & Biases (the original's openrlhf flag): the API key, or no value to "
        "use wandb's own login; needs the wandb package. Never written to disk.", None)
    wandb_run_name: Optional[str] = flag("the run's name (wandb, TrainingArguments.run_name).",
                                         None)
    local_rank: int = flag("set by the deepspeed launcher.", -1, configurable=False)

    def check(self) -> None:
        for name in ("max_len", "train_batch_size", "micro_train_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}")
        _unit_interval("lr_warmup_ratio", self.lr_warmup_ratio)
        _unit_interval("eval_holdout", self.eval_holdout)

    def check_required(self) -> None:
        """The flags without which there is nothing to train (checked when training starts,
        so that the original's logging flags are checked first)."""
        for name in ("pretrain", "dataset", "save_path"):
            if not getattr(self, name, None):  # dataset: each stage's own
                raise ValueError(f"--{name} is required")


@dataclass(frozen=True, kw_only=True)
class PreferenceOptions(TrainingOptions):
    """Train a causal LM with DPO / Bradley-Terry on chosen/rejected pairs: the SWEET-RL critic,
    the agent's DPO, the multi-turn DPO baseline, and the scalar-head critics the paper
    compares the SWEET-RL critic with (--critic_head).

    Example (the SWEET-RL critic on backend pairs, 8 GPUs):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_backend.json \\
            --pretrain meta-llama/Llama-3.1-8B-Instruct --dataset outputs/critic_pairs.jsonl \\
            --save_path outputs/critic

    Example (tiny model, one CPU):
        python scripts/train_dpo.py --pretrain outputs/tiny-llama --dataset pairs.jsonl \\
            --save_path outputs/dpo --learning_rate 1e-3 --train_batch_size 2 --max_len 512

    Example (the paper's "w/ Regression Head" critic: the same critic pairs, a scalar head;
    --critic_head value trains the "w/ Value Function" critic on evaluated trajectories):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_backend.json \\
            --critic_head regression --pretrain meta-llama/Llama-3.1-8B-Instruct \\
            --dataset outputs/critic_pairs.jsonl --save_path outputs/critic_regression

    Example (the paper's frontend critic: a Qwen2-VL that sees the reference page, on the VLM
    critic pairs of evaluate_html.py --vlm_preference_path):
        deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_frontend.json \\
            --critic_head vlm_regression --pretrain Qwen/Qwen2-VL-7B-Instruct \\
            --dataset outputs/vlm_critic_pairs.jsonl --save_path outputs/critic_vlm
    """

    dataset: Optional[str] = flag(
        "JSONL of {\"chosen\", \"rejected\"} or {\"prompt\", \"chosen\", \"rejected\"}; other "
        "key names via --chosen_key / --rejected_key / --prompt_key; required.", None)
    ref_pretrain: Optional[str] = flag(
        "a different reference model (default: --pretrain). Reference log-probs are computed "
        "once, before training.", None)
    beta: float = flag("the DPO beta (the temperature of the preference loss).", 0.1)
    response_template: Optional[str] = flag(
        "e.g. \"<|start_header_id|>assistant<|end_header_id|>\": train on every assistant "
        "turn; without it, on the response after the prompt (the prompt key, else the longest "
        "common token prefix of chosen and rejected).", None)
    mean_log_prob: bool = flag(
        "length-normalise: token-mean log-prob over all trained tokens (the original code). "
        "Neither it nor --per_turn_mean: the sum (standard DPO).", False)
    per_turn_mean: bool = flag(
        "sum over turns of each turn's mean log-prob (the paper); overrides --mean_log_prob.",
        False)
    nll_loss_coef: float = flag(
        "weight of the chosen responses' token-mean NLL added to the loss.", 0.0)
    chosen_key: str = flag("the dataset key holding the preferred text.", "chosen")
    rejected_key: str = flag("the dataset key holding the other text.", "rejected")
    prompt_key: Optional[str] = flag(
        "the dataset key holding a shared prompt (rows without it have none).", "prompt")
    ref_in_memory: bool = flag(
        "keep a frozen reference model through training instead of computing reference "
        "log-probs once beforehand (for comparison).", False)
    critic_head: str = flag(
        "\"logprob\": the model above, a causal LM scored by its log-probs. \"regression\": a "
        "linear head (hidden -> 1) on the mean of the agent's last hidden states, trained with "
        "-log sigmoid(r_chosen - r_rejected) on the same pairs. \"value\": the same head "
        "predicting success (reward >= 1.0) with a binary cross-entropy; --dataset is then an "
        "evaluated trajectory file and every assistant turn is one row: ground-truth prefix + "
        "its input + output. A head's weights are saved with the backbone (score_head.*) plus "
        "critic_head.json; load them with sweet_rl.training.heads.load_scalar_critic. "
        "\"vlm_regression\": the paper's frontend critic: --pretrain is a Qwen2-VL "
        "(Qwen/Qwen2-VL-7B-Instruct in the paper), the same head (without bias, as the "
        "training fork's) on the mean over every visual and text token, Bradley-Terry on "
        "--dataset's VLM critic pairs ({\"chosen\": {\"image\", \"text\"}, \"rejected\": "
        "{...}}, from evaluate_html.py --vlm_preference_path; pictures resized to at most "
        "1280x28x28 pixels); the processor is saved with it; load it with "
        "sweet_rl.training.vlm_heads.load_vlm_critic. No reference model, beta or log-prob "
        "reduction applies to a head; --ref_pretrain, --ref_in_memory and --nll_loss_coef are "
        "refused with one.", "logprob", choices=CRITIC_HEADS)

    def check(self) -> None:
        if self.critic_head != "logprob":
            # these only mean something for a language-model critic; silently ignoring one
            # would train something other than what the command asked for
            for name in ("ref_pretrain", "ref_in_memory", "nll_loss_coef"):
                if getattr(self, name):
                    raise ValueError(f"--{name} needs --critic_head logprob: a "
                                     f"{self.critic_head} head has no reference model and no "
                                     "language-model loss")

    @property
    def reduction(self) -> str:
        """How token log-probs become one score: per_turn_mean wins over mean_log_prob."""
        return ("per_turn_mean" if self.per_turn_mean
                else "mean" if self.mean_log_prob else "sum")


@dataclass(frozen=True, kw_only=True)
class SFTOptions(TrainingOptions):
    """Fine-tune on the successful trajectories of an evaluated trajectory JSONL (the rejection
    fine-tuning baseline): keeps the rows with ``reward >= min_reward`` and trains on the
    agent's turns of the whole chat-formatted dialogue (``response_template`` masking, shared
    with train_dpo).

    Example (8 GPUs, paper-scale settings):
        deepspeed --num_gpus 8 scripts/train_sft.py --config configs/rft_backend.json \\
            --pretrain meta-llama/Llama-3.1-8B-Instruct --dataset outputs/train_eval.jsonl \\
            --save_path outputs/rft
    """

    dataset: Optional[str] = flag("trajectories with \"reward\" (evaluate's output); required.",
                                  None)
    response_template: Optional[str] = flag(
        "the marker of the agent's turns, which are the tokens trained on (\"\" trains on "
        "every token).", "<|start_header_id|>assistant<|end_header_id|>")
    min_reward: float = flag(
        "keep the rows whose reward is at least this (1.0: all hidden tests passed).", 1.0)
