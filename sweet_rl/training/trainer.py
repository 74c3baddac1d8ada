"""The ``transformers.Trainer`` pieces: a DPO trainer, a metrics callback, arguments, loading.

:class:`PreferenceTrainer` overrides only ``compute_loss`` (DPO / Bradley-Terry with an
optional NLL term, Rafailov et al. 2023; SWEET-RL, Zhou et al. 2025, Section 4) and ``log``
(adds the preference metrics). Everything else -- DeepSpeed ZeRO, bf16, gradient
checkpointing, gradient accumulation, the cosine-with-floor schedule, checkpoint saving and
``report_to`` -- is the stock Trainer, configured by :func:`training_arguments`.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from typing import Dict, Optional

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from sweet_rl.training.options import TrainingOptions
from sweet_rl.training.losses import dpo_loss, nll_loss, sequence_log_probs, token_log_probs
from sweet_rl.training.reference import score_batch

logger = logging.getLogger(__name__)


class PreferenceTrainer(Trainer):
    """DPO on batches from :class:`~sweet_rl.training.collators.PreferenceCollator`.

    The batch holds 2B rows (chosen then rejected) and ``ref_logps`` (2B,), the reference
    scores precomputed by :func:`~sweet_rl.training.reference.precompute_reference_logps`.
    With ``ref_model`` the reference scores are computed on the fly instead (two models in
    memory; kept for comparison, see ``benchmarks/bench_dpo_memory.py``).
    """

    # compute_loss returns a per-micro-batch mean; the Trainer divides it by the accumulation.
    loss_is_scaled_for_ga = False

    def __init__(self, *args, beta: float = 0.1, reduction: str = "sum",
                 nll_loss_coef: float = 0.0, ref_model=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.beta, self.reduction, self.nll_loss_coef = beta, reduction, nll_loss_coef
        self.ref_model = ref_model
        self._stored: Dict[str, list] = defaultdict(list)

    def compute_loss(self, model, inputs: Dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch=None):
        input_ids, turn_ids = inputs["input_ids"], inputs["turn_ids"]  # (2B, T)
        logits = model(input_ids=input_ids, attention_mask=inputs["attention_mask"],
                       use_cache=False).logits  # (2B, T, V)
        token_logps, turns = token_log_probs(logits, input_ids, turn_ids)  # (2B, T-1)
        scores = sequence_log_probs(token_logps, turns, self.reduction)  # (2B,)
        if self.ref_model is not None:
            with torch.no_grad():
                ref = score_batch(self.ref_model, inputs, self.reduction)  # (2B,)
        else:
            ref = inputs["ref_logps"]  # (2B,)
        ref = ref.to(scores.dtype)
        b = scores.shape[0] // 2
        losses, chosen_rewards, rejected_rewards = dpo_loss(
            scores[:b], scores[b:], ref[:b], ref[b:], self.beta)  # (B,) each
        loss = losses.mean()
        metrics = {"dpo_loss": loss.detach()}
        if self.nll_loss_coef:
            nll = nll_loss(token_logps[:b], turns[:b])
            loss = loss + self.nll_loss_coef * nll
            metrics["nll"] = nll.detach()
        if model.training:
            metrics.update(
                accuracy=(chosen_rewards > rejected_rewards).float().mean(),
                chosen_reward=chosen_rewards.mean(), rejected_reward=rejected_rewards.mean(),
                margin=(chosen_rewards - rejected_rewards).mean())
            for name, value in metrics.items():
                self._stored[name].append(value.float().item())
        if return_outputs:
            return loss, {"chosen_rewards": chosen_rewards, "rejected_rewards": rejected_rewards}
        return loss

    def log(self, logs: Dict[str, float], start_time: Optional[float] = None) -> None:
        """Add the preference metrics, averaged since the last log and over processes."""
        if self._stored and "loss" in logs:
            names = sorted(self._stored)
            values = torch.tensor([sum(self._stored[n]) / len(self._stored[n]) for n in names],
                                  device=self.args.device)  # (M,)
            if self.accelerator.num_processes > 1:
                values = self.accelerator.reduce(values, reduction="mean")
            logs.update({n: round(v, 6) for n, v in zip(names, values.tolist())})
            self._stored.clear()
        super().log(logs, start_time)


class MetricsJsonlCallback(TrainerCallback):
    """Append each training log (loss, accuracy, rewards, margin, lr, epoch, step) as one line
    of ``path``; main process only. The lines go to ``<path>.partial`` while training runs and
    replace ``path`` when it ends, so a run that fails leaves an earlier run's file as it was."""

    RENAME = {"learning_rate": "lr"}

    def __init__(self, path: str):
        self.path = path
        self.partial = path + ".partial"

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            open(self.partial, "w").close()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        from sweet_rl.io import append_jsonl

        record = {self.RENAME.get(k, k): v for k, v in logs.items()}
        record.update(step=state.global_step, epoch=state.epoch)
        append_jsonl(self.partial, [record])

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and os.path.exists(self.partial):
            os.replace(self.partial, self.path)


def training_arguments(options: TrainingOptions, gradient_accumulation: int,
                       deepspeed: Optional[dict]) -> TrainingArguments:
    """TrainingArguments from the checked options (see ``sweet_rl.training.options``)."""
    save_steps = options.save_steps
    # Without a GPU: use_cpu, so that bf16 means bf16 autocast on the CPU and torchrun gives
    # DDP over gloo. use_cpu would switch DeepSpeed off, so DeepSpeed on the CPU trains in
    # fp32 (run.py drops bf16) and its processes get a gloo state configured beforehand.
    use_cpu = not torch.cuda.is_available() and not deepspeed
    accelerator_config = None
    if deepspeed and not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        accelerator_config = _deepspeed_cpu_state()
    # transformers >= 5.x renamed gradient_checkpointing to activation_checkpointing
    fields = TrainingArguments.__dataclass_fields__
    ckpt = (
        "activation_checkpointing"
        if "activation_checkpointing" in fields
        else "gradient_checkpointing"
    )
    checkpointing = {ckpt: options.gradient_checkpointing,
                     f"{ckpt}_kwargs": {"use_reentrant": False}}
    return TrainingArguments(
        output_dir=options.save_path,
        per_device_train_batch_size=options.micro_train_batch_size,
        gradient_accumulation_steps=gradient_accumulation,
        # the options keep an int as written (--max_epochs 4), for the sidecar; the
        # TrainingArguments (saved as training_args.bin) hold floats, as they declare
        learning_rate=float(options.learning_rate),
        num_train_epochs=float(options.max_epochs),
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": float(options.min_lr_ratio)},
        warmup_steps=float(options.lr_warmup_ratio),  # a value < 1 is a ratio of all steps
        weight_decay=float(options.weight_decay),
        max_grad_norm=float(options.max_grad_norm),
        logging_steps=options.logging_steps,
        save_strategy="steps" if save_steps > 0 else "no",
        save_steps=save_steps if save_steps > 0 else 500,
        save_only_model=True,
        report_to=options.report_to or "none",
        run_name=options.wandb_run_name,  # the original's --wandb_run_name
        bf16=options.bf16,
        use_cpu=use_cpu,
        **checkpointing,
        seed=options.seed,
        remove_unused_columns=False,  # batches come from our own collator
        dataloader_pin_memory=torch.cuda.is_available(),
        deepspeed=deepspeed,
        local_rank=options.local_rank,
        disable_tqdm=False,
        **({"accelerator_config": accelerator_config} if accelerator_config else {}),
    )


def _deepspeed_cpu_state() -> dict:
    """DeepSpeed over several CPU processes (tests; CI has no GPU).

    Accelerate picks no communication backend for DeepSpeed on a machine without a GPU and so
    counts one process, which fills DeepSpeed's ``train_batch_size`` with a wrong world size.
    Configuring its state with gloo first, as accelerate would for DeepSpeed, and telling the
    Trainer to use that state fixes the count. No effect with a GPU (nccl is picked there).
    """
    from accelerate import PartialState

    saved = os.environ.get("ACCELERATE_USE_DEEPSPEED")
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    try:
        PartialState(backend="gloo")
    finally:
        if saved is None:
            del os.environ["ACCELERATE_USE_DEEPSPEED"]
        else:
            os.environ["ACCELERATE_USE_DEEPSPEED"] = saved
    return {"use_configured_state": True}


def load_causal_lm(path: str, options: TrainingOptions, use_deepspeed: bool):
    """Load a causal LM for training. Under DeepSpeed with bf16 the weights load in bf16
    (DeepSpeed keeps fp32 master copies); otherwise fp32 with bf16 autocast by the Trainer."""
    from transformers import AutoModelForCausalLM

    from sweet_rl.training.config import attention_implementation

    dtype = torch.bfloat16 if options.bf16 and use_deepspeed else torch.float32
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype, attn_implementation=attention_implementation(options.flash_attn))
    model.config.use_cache = False
    return model


def load_unsharded(path: str, options: TrainingOptions, use_deepspeed: bool, device):
    """Load a full (not ZeRO-3-partitioned) copy of a model, for scoring only."""
    from transformers.integrations import deepspeed as hf_ds

    saved = hf_ds._hf_deepspeed_config_weak_ref
    hf_ds.unset_hf_deepspeed_config()  # from_pretrained would otherwise partition it (zero.Init)
    try:
        model = load_causal_lm(path, options, use_deepspeed)
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = saved
    model.requires_grad_(False)
    return model.to(device).eval()
