"""The options of one training run, typed and checked once.

The command line (through fire), a ``configs/*.json`` file and the defaults below give values
of loose types: fire turns ``--max_epochs 4`` into an int and ``--bf16 false`` into the text
``"false"``, a config file may hold ``"2e-7"`` as text. :class:`TrainingOptions` converts and
checks them all in ``__post_init__``, so the training code reads ``options.max_len`` as an
int and a bad value fails at once with the flag's name, before any data or model is read.

The field defaults are the flags' defaults (``config.DPO_DEFAULTS`` / ``SFT_DEFAULTS`` are
derived from them), and ``dataclasses.asdict`` of the options is what the run's
``training.config.json`` sidecar records.

No torch import here, so ``--help`` and config checks stay instant.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional, Union

# set by the deepspeed launcher, never by a config file; recorded in the sidecar all the same
LAUNCHER_FIELDS = ("local_rank",)

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0", "")


def _integer(flag: str, value: Any) -> int:
    # bool is an int subclass, but --train_batch_size True is a mistake, not 1
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if isinstance(number, float) and number.is_integer():
        return int(number)
    raise ValueError(f"--{flag} must be an integer, got {value!r}")


def _number(flag: str, value: Any) -> Union[int, float]:
    # an int is kept as given (int counts as float for typing): the sidecar then records
    # ``"max_epochs": 4`` exactly as the flag or the config file wrote it
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ValueError(f"--{flag} must be a number, got {value!r}")


def _boolean(flag: str, value: Any) -> bool:
    # fire leaves ``--bf16 false`` as the text "false", which plain truth testing reads as on
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"--{flag} must be true or false, got {value!r}")


def _text(flag: str, value: Any) -> Optional[str]:
    # fire reads ``--pretrain 007`` as the number 7; a path or a key is text
    return None if value is None else str(value)


def _optional_integer(flag: str, value: Any) -> Optional[int]:
    return None if value is None else _integer(flag, value)


def _reporters(flag: str, value: Any) -> Union[str, List[str]]:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"--{flag} must be a name or a list of names, got {value!r}")


# annotation (as written, see the __future__ import) -> converter
_CONVERTERS = {"int": _integer, "float": _number, "bool": _boolean, "str": _text,
               "Optional[str]": _text, "Optional[int]": _optional_integer,
               "Union[str, List[str]]": _reporters}


# --critic_head: the log-prob critic (SWEET-RL), the two scalar heads it is compared with, and
# the frontend's vision-language critic (a scalar head on a Qwen2-VL that sees the reference)
CRITIC_HEADS = ("logprob", "regression", "value", "vlm_regression")


def _unit_interval(flag: str, value: float) -> None:
    if not 0 <= value < 1:
        raise ValueError(f"--{flag} must be in [0, 1), got {value}")


# The --help text of the flags that train_dpo and train_sft describe word for word, written
# once: each stage adds it to its main docstring (sweet_rl.cli.helptext.add_args). Flags
# whose text differs between the stages (pretrain, max_len, seed, ...) stay in their own.
SHARED_FLAG_HELP = """
save_path: output directory (HF model + tokenizer, metrics.jsonl).
learning_rate: the peak learning rate.
zero_stage: 0 = no DeepSpeed; 1, 2 or 3: DeepSpeed ZeRO under the deepspeed launcher
    (configs/ds_zero*.json or --deepspeed_config); ignored without the launcher.
bf16: train in bfloat16 (mixed precision).
gradient_checkpointing: recompute activations in the backward pass (less memory).
flash_attn: use flash_attention_2 when the flash_attn package is installed (sdpa
    attention otherwise).
lr_warmup_ratio: share of the steps spent warming the learning rate up (cosine
    schedule).
min_lr_ratio: the cosine schedule's floor, as a share of --learning_rate.
logging_steps: optimizer steps between two lines of metrics.jsonl.
report_to: where the Trainer also reports: "none", "wandb", "tensorboard" (or a list).
save_steps: optimizer steps between two checkpoints (-1: the final model only).
weight_decay: AdamW's weight decay.
max_grad_norm: gradients are clipped to this norm.
deepspeed_config: a DeepSpeed JSON file instead of configs/ds_zero{2,3}.json.
eval_steps: accepted for the original's commands; the held-out share is not evaluated.
eval_holdout: the first share of --dataset kept out of training, as the original's
    openrlhf fork kept its first 3% as an evaluation split (0: train on all).
use_wandb: log to Weights & Biases (the original's openrlhf flag): the API key, or
    no value to use wandb's own login; needs the wandb package. Never written to disk.
wandb_run_name: the run's name (wandb, TrainingArguments.run_name).
local_rank: set by the deepspeed launcher.
"""


@dataclass(frozen=True)
class TrainingOptions:
    """Flags shared by train_dpo and train_sft, with their defaults."""

    pretrain: Optional[str] = None
    dataset: Optional[str] = None
    save_path: Optional[str] = None
    learning_rate: float = 2e-7
    max_epochs: float = 1
    max_len: int = 8192
    train_batch_size: int = 8
    micro_train_batch_size: int = 1
    # 0..3 is checked only when DeepSpeed is used: outside the launcher the flag is ignored
    zero_stage: int = 0
    bf16: bool = False
    gradient_checkpointing: bool = False
    flash_attn: bool = False
    response_template: Optional[str] = None
    seed: int = 42
    lr_warmup_ratio: float = 0.03
    min_lr_ratio: float = 0.1
    logging_steps: int = 1
    report_to: Union[str, List[str]] = "none"
    save_steps: int = -1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    deepspeed_config: Optional[str] = None
    # openrlhf flags of the original README (see config.apply_original_flags)
    eval_steps: Optional[int] = None
    # the original's openrlhf fork keeps the first 3% of --dataset out of training (its eval
    # split); published numbers were trained on the other 97%
    eval_holdout: float = 0.03
    # the wandb key or True before config.apply_original_flags, True or None after it
    use_wandb: Union[str, bool, None] = None
    wandb_run_name: Optional[str] = None
    local_rank: int = -1

    def __post_init__(self) -> None:
        if self.local_rank is None:  # no launcher
            object.__setattr__(self, "local_rank", -1)
        for spec in fields(self):
            convert = _CONVERTERS.get(spec.type)
            if convert is not None:
                # frozen: the one place where values are set after construction
                object.__setattr__(self, spec.name, convert(spec.name, getattr(self, spec.name)))
        for name in ("max_len", "train_batch_size", "micro_train_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}")
        _unit_interval("lr_warmup_ratio", self.lr_warmup_ratio)
        _unit_interval("eval_holdout", self.eval_holdout)

    @classmethod
    def flag_defaults(cls) -> Dict[str, Any]:
        """Every flag a config file may set, with its default (launcher fields left out)."""
        return {spec.name: spec.default for spec in fields(cls) if spec.name not in LAUNCHER_FIELDS}

    def check_required(self) -> None:
        """The flags without which there is nothing to train (checked when training starts,
        so that the original's logging flags are checked first)."""
        for name in ("pretrain", "dataset", "save_path"):
            if not getattr(self, name):
                raise ValueError(f"--{name} is required")


@dataclass(frozen=True)
class PreferenceOptions(TrainingOptions):
    """train_dpo: the critic, the agent's DPO, the multi-turn DPO baseline."""

    ref_pretrain: Optional[str] = None
    beta: float = 0.1
    mean_log_prob: bool = False
    per_turn_mean: bool = False
    nll_loss_coef: float = 0.0
    chosen_key: str = "chosen"
    rejected_key: str = "rejected"
    prompt_key: Optional[str] = "prompt"
    ref_in_memory: bool = False
    # what the critic is: "logprob" (a causal LM, DPO on log-prob ratios), or a scalar head
    # on the pooled backbone (sweet_rl.training.heads): "regression" (Bradley-Terry on the
    # same pairs) or "value" (success from evaluated trajectories), the paper's ablations;
    # "vlm_regression" (sweet_rl.training.vlm_heads): the paper's frontend critic, a Qwen2-VL
    # with the regression head, Bradley-Terry on VLM critic pairs (picture + dialogue)
    critic_head: str = "logprob"

    def __post_init__(self) -> None:
        super().__post_init__()
        head = (self.critic_head or "").strip().lower()
        if head not in CRITIC_HEADS:
            raise ValueError(f"--critic_head must be one of {', '.join(CRITIC_HEADS)}, "
                             f"got {self.critic_head!r}")
        object.__setattr__(self, "critic_head", head)
        if head != "logprob":
            # these only mean something for a language-model critic; silently ignoring one
            # would train something other than what the command asked for
            for flag in ("ref_pretrain", "ref_in_memory", "nll_loss_coef"):
                if getattr(self, flag):
                    raise ValueError(f"--{flag} needs --critic_head logprob: a {head} head "
                                     "has no reference model and no language-model loss")

    @property
    def reduction(self) -> str:
        """How token log-probs become one score: per_turn_mean wins over mean_log_prob."""
        return ("per_turn_mean" if self.per_turn_mean
                else "mean" if self.mean_log_prob else "sum")


@dataclass(frozen=True)
class SFTOptions(TrainingOptions):
    """train_sft: rejection fine-tuning on the successful trajectories."""

    response_template: Optional[str] = "<|start_header_id|>assistant<|end_header_id|>"
    min_reward: float = 1.0
