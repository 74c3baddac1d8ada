"""Hyperparameters for the training stages: DeepSpeed configs, the original's logging flags,
the held-out share and gradient accumulation.

The options themselves (defaults < a ``--config`` file such as ``configs/critic_backend.json``
< the command line) are :mod:`sweet_rl.training.options`, read by :mod:`sweet_rl.flags`.
Config files hold the paper's per-stage values (SWEET-RL, Zhou et al. 2025, Appendix: lr 2e-7,
beta 0.1, NLL 0.01, batch 8 / micro-batch 1, ZeRO-3, bf16; critic 4 epochs backend / 8 frontend
at max length 8192; agent 1 epoch at 16384). Keys starting with ``_`` are comments and are
ignored.

No torch import here, so ``--help`` and config checks stay instant.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import logging
import os
from typing import Any, Dict, List, Optional, Tuple, TypeVar

from sweet_rl.training.options import TrainingOptions

logger = logging.getLogger(__name__)

Options = TypeVar("Options", bound=TrainingOptions)

REPO_CONFIGS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs"
)

# ZeRO configs whose "auto" values the transformers Trainer fills from TrainingArguments
# (batch sizes, accumulation, clipping, bf16, bucket sizes). No optimizer/scheduler section:
# the Trainer's AdamW and its cosine-with-floor schedule are handed to DeepSpeed.
_DS_COMMON: Dict[str, Any] = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"},
    "fp16": {"enabled": "auto"},
    "steps_per_print": 1000000,
    "wall_clock_breakdown": False,
}
BUILTIN_DS_CONFIGS: Dict[int, Dict[str, Any]] = {
    2: dict(_DS_COMMON, zero_optimization={
        "stage": 2, "overlap_comm": True, "contiguous_gradients": True,
        "reduce_bucket_size": "auto", "allgather_bucket_size": 5e8}),
    3: dict(_DS_COMMON, zero_optimization={
        "stage": 3, "overlap_comm": True, "contiguous_gradients": True,
        "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
        # save_model gathers the shards into one full 16-bit state dict (HF format)
        "stage3_gather_16bit_weights_on_model_save": True}),
}


def split_holdout(items: List[Any], fraction: float) -> Tuple[List[Any], List[Any]]:
    """``(trained, held out)``: the first ``int(len * fraction)`` items are held out, as the
    original's openrlhf fork holds out the first 3% of a JSONL dataset that has no test split."""
    fraction = float(fraction)
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"--eval_holdout must be in [0, 1), got {fraction}")
    cut = int(len(items) * fraction)
    return list(items[cut:]), list(items[:cut])


def apply_original_flags(options: Options, stage: str) -> Options:
    """Give the original's openrlhf logging flags their meaning here, before any work starts.

    ``--use_wandb KEY`` logs to Weights & Biases through the Trainer (``report_to`` gains
    ``wandb``); the key reaches wandb as ``WANDB_API_KEY`` in this process's environment
    (a key already there wins, as openrlhf only logged in when wandb had no key) and is
    replaced by ``True`` in the returned options, so no sidecar or metrics file ever holds it.
    The project defaults to openrlhf's ``openrlhf_train_dpo`` / ``openrlhf_train_sft`` unless
    ``WANDB_PROJECT`` is set. ``--wandb_run_name`` is the run's name. ``--eval_steps`` gets a
    notice: there is no evaluation split here.
    """
    from sweet_rl.notices import notice_once

    if options.eval_steps is not None:
        notice_once("--eval_steps ignored: the held-out share of --dataset (--eval_holdout, the "
                    "original's first 3%) is kept out of training but not evaluated here")
    key = options.use_wandb
    if key is None or key is False or str(key) in ("", "False", "None"):
        return dataclasses.replace(options, use_wandb=None)
    if importlib.util.find_spec("wandb") is None:
        raise ValueError("--use_wandb needs the wandb package, which is not installed "
                         "(pip install wandb), or leave --use_wandb out")
    if str(key) != "True":  # a bare --use_wandb: the login wandb already has
        os.environ.setdefault("WANDB_API_KEY", str(key))
    os.environ.setdefault("WANDB_PROJECT", f"openrlhf_{stage}")
    reporters = [name for name in options.report_to if name != "none"]
    if "wandb" not in reporters:
        reporters.append("wandb")
    return dataclasses.replace(options, report_to=reporters, use_wandb=True)


def gradient_accumulation_steps(train_batch_size: int, micro_train_batch_size: int,
                                world_size: int) -> int:
    """train_batch_size = micro_train_batch_size x world_size x accumulation (OpenRLHF's rule)."""
    per_step = micro_train_batch_size * world_size
    if train_batch_size < per_step or train_batch_size % per_step:
        raise ValueError(
            f"train_batch_size {train_batch_size} is not a multiple of "
            f"micro_train_batch_size {micro_train_batch_size} x {world_size} processes"
        )
    return train_batch_size // per_step


def deepspeed_config(zero_stage: int, path: Optional[str] = None) -> Dict[str, Any]:
    """The ZeRO config for ``zero_stage`` (1, 2 or 3): ``path`` if given, else
    ``configs/ds_zero{2,3}.json`` from the repository, else the built-in copy of it.
    Stage 1 reuses the stage-2 file with the stage changed."""
    if zero_stage not in (1, 2, 3):
        raise ValueError(f"zero_stage must be 0 (no DeepSpeed), 1, 2 or 3, got {zero_stage}")
    base = 3 if zero_stage == 3 else 2
    path = path or os.path.join(REPO_CONFIGS, f"ds_zero{base}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    else:
        config = copy.deepcopy(BUILTIN_DS_CONFIGS[base])
    config.setdefault("zero_optimization", {})["stage"] = zero_stage
    return config


def under_distributed_launcher(local_rank: int = -1) -> bool:
    """True when a launcher (``deepspeed``, ``torchrun``) started this process."""
    return local_rank is not None and local_rank >= 0 or "LOCAL_RANK" in os.environ


def attention_implementation(flash_attn: bool) -> str:
    """``flash_attention_2`` when asked for and importable, else PyTorch's ``sdpa``."""
    if flash_attn:
        if importlib.util.find_spec("flash_attn") is not None:
            return "flash_attention_2"
        logger.warning(
            "--flash_attn: the flash_attn package is not installed; using sdpa attention"
        )
    return "sdpa"
