"""Training entry points: checked options in, trained Hugging Face model directory out.

:func:`train_preference` (critic, agent DPO, multi-turn DPO baseline),
:func:`train_scalar_critic` (the paper's regression-head and value-function critics and its
frontend vision-language critic, ``--critic_head``) and :func:`train_sft` (rejection
fine-tuning) share the set-up: read and
check the data before torch is imported (a bad line stops the run in well under a second,
with its file, line and field), tokenise it before anything is written (bad input leaves
``save_path`` untouched),
decide on DeepSpeed (only when ``zero_stage > 0`` and a launcher started the process), derive
gradient accumulation from ``train_batch_size = micro_train_batch_size x world_size x
accumulation``, train with the Trainer, save the final model with its tokenizer via
``trainer.save_model`` (which gathers ZeRO-3 shards into a full 16-bit state dict), and append
per-step metrics to ``<save_path>/metrics.jsonl``.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

from sweet_rl.training.options import PreferenceOptions, SFTOptions, TrainingOptions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setup:
    """What both stages need before reading their data: the options as trained (``bf16`` may
    be switched off here), the tokenizers, the DeepSpeed decision and gradient accumulation."""

    options: TrainingOptions
    tokenizer: Any
    seq: Any  # masks.SequenceTokenizer
    use_deepspeed: bool
    deepspeed_config: Optional[dict]
    accumulation: int

    def training_arguments(self):
        """TrainingArguments; building them sets up the distributed state, so not before the
        data has been read and checked."""
        from sweet_rl.training.trainer import training_arguments

        return training_arguments(self.options, self.accumulation, self.deepspeed_config)


def _setup(options: TrainingOptions) -> Setup:
    """Tokenizer, sequence tokenizer, DeepSpeed decision, gradient accumulation."""
    import torch
    from transformers import AutoTokenizer

    from sweet_rl.training.config import (deepspeed_config, gradient_accumulation_steps,
                                          under_distributed_launcher)
    from sweet_rl.training.collators import SequenceTokenizer

    options.check_required()
    tokenizer = AutoTokenizer.from_pretrained(options.pretrain)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    seq = SequenceTokenizer(tokenizer, options.max_len, options.response_template)
    use_ds = options.zero_stage > 0 and under_distributed_launcher(options.local_rank)
    if options.zero_stage > 0 and not use_ds:
        logger.warning("--zero_stage %s ignored: not started by the deepspeed launcher; "
                       "training on one device without DeepSpeed", options.zero_stage)
    if options.bf16 and use_ds and not torch.cuda.is_available():
        # transformers allows CPU bf16 only with use_cpu, which switches DeepSpeed off
        logger.warning("--bf16 ignored: DeepSpeed without a CUDA GPU trains in fp32")
        options = dataclasses.replace(options, bf16=False)  # the sidecar records it off
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    accumulation = gradient_accumulation_steps(options.train_batch_size,
                                               options.micro_train_batch_size, world_size)
    ds_config = deepspeed_config(options.zero_stage, options.deepspeed_config) if use_ds else None
    return Setup(options, tokenizer, seq, use_ds, ds_config, accumulation)


def _finish(trainer, result, options: TrainingOptions, stage: str, tokens: int, examples: int,
            start: float) -> Dict[str, Any]:
    """Save the model, the sidecar, and return (and log) the one-line summary.

    Throughput counts the training loop only (``train_runtime``), all processes together.
    """
    from sweet_rl.io import write_sidecar

    trainer.save_model(options.save_path)
    history = [h for h in trainer.state.log_history if "loss" in h]
    last = history[-1] if history else {}
    runtime = max(float(result.metrics.get("train_runtime", 0.0)), 1e-9)
    epochs = options.max_epochs
    summary = {"stage": stage, "examples": examples, "steps": trainer.state.global_step,
               "final_loss": last.get("loss"), "final_accuracy": last.get("accuracy"),
               "train_seconds": round(runtime, 3), "total_seconds": round(time.time() - start, 2),
               "samples_per_second": round(examples * epochs / runtime, 3),
               "tokens_per_second": round(tokens * epochs / runtime, 1),
               "world_size": trainer.args.world_size,
               "zero_stage": options.zero_stage if trainer.is_deepspeed_enabled else 0,
               "save_path": options.save_path}
    summary.update(peak_memory())
    if isinstance(options, PreferenceOptions):  # train_dpo: which critic this run trained
        summary["critic_head"] = options.critic_head
    if trainer.is_world_process_zero():
        write_sidecar(
            os.path.join(options.save_path, "training"), dataclasses.asdict(options), stage
        )
        logger.info("%s summary: %s", stage, summary)
        print(f"{stage}: " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
    _leave_process_group()
    return summary


def peak_memory() -> Dict[str, float]:
    """This process's peak memory so far, in MiB: resident set size, and on a GPU the most
    allocated by tensors and reserved by PyTorch's allocator on its device (under a launcher,
    rank 0's figures; each rank holds its own share of a ZeRO-3 run)."""
    import resource

    import torch

    peaks = {"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        peaks["peak_gpu_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        peaks["peak_gpu_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    return peaks


def _leave_process_group() -> None:
    """Tear the process group down before the interpreter exits.

    Left to interpreter shutdown, gloo's worker threads are destroyed while still joinable and
    a rank can abort with "terminate called without an active exception" (exit -6) after a
    training run that itself succeeded. The barrier keeps rank 0 from leaving while another rank
    still gathers the ZeRO-3 shards for the final save.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _held_out(items, options: TrainingOptions, what: str):
    """The items trained on, after the original's hold-out (``--eval_holdout``)."""
    from sweet_rl.training.config import split_holdout

    trained, held = split_holdout(items, options.eval_holdout)
    if not trained:
        raise ValueError(f"{options.dataset}: nothing left to train on after holding out "
                         f"{len(held)} {what} (--eval_holdout {options.eval_holdout})")
    logger.info("training on %d %s; the first %d are held out (--eval_holdout %s, as the "
                "original's training fork)", len(trained), what, len(held), options.eval_holdout)
    return trained


def _read_pairs(options: PreferenceOptions):
    """The pairs trained on, read and checked (no tokenizer, no torch needed)."""
    from sweet_rl.training.data import read_preference_pairs

    options.check_required()
    pairs = read_preference_pairs(options.dataset, options.chosen_key,
                                  options.rejected_key, options.prompt_key)
    return _held_out(pairs, options, "pairs")


def train_preference(options: PreferenceOptions) -> Dict[str, Any]:
    """DPO / Bradley-Terry training (see :class:`~sweet_rl.training.options.PreferenceOptions`)."""
    from sweet_rl.training.data import tokenize_pairs

    start = time.time()
    pairs = _read_pairs(options)  # before torch: a bad line stops the run at once
    import torch

    from sweet_rl.training.collators import PreferenceCollator
    from sweet_rl.training.reference import precompute_reference_logps
    from sweet_rl.training.trainer import (MetricsJsonlCallback, PreferenceTrainer,
                                           load_causal_lm, load_unsharded)

    setup = _setup(options)
    options, use_ds = setup.options, setup.use_deepspeed
    reduction = options.reduction
    examples = tokenize_pairs(pairs, setup.seq)
    args = setup.training_arguments()  # sets up distributed
    collator = PreferenceCollator(setup.tokenizer.pad_token_id)
    ref_path = options.ref_pretrain or options.pretrain
    autocast = torch.bfloat16 if options.bf16 and not use_ds else None
    ref_model, policy = None, None
    if options.ref_in_memory:
        ref_model = load_unsharded(ref_path, options, use_ds, args.device)
    elif not options.ref_pretrain and not (use_ds and options.zero_stage == 3):
        # the initial policy is the reference: score with it, then train the same object
        policy = load_causal_lm(options.pretrain, options, use_ds).to(args.device)
        precompute_reference_logps(policy, examples, collator, reduction,
                                   options.micro_train_batch_size, args.device,
                                   args.process_index, args.world_size, autocast)
    else:
        scorer = load_unsharded(ref_path, options, use_ds, args.device)
        precompute_reference_logps(scorer, examples, collator, reduction,
                                   options.micro_train_batch_size, args.device,
                                   args.process_index, args.world_size, autocast)
        del scorer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    if policy is None:
        policy = load_causal_lm(options.pretrain, options, use_ds)
    trainer = PreferenceTrainer(
        model=policy, args=args, train_dataset=examples, data_collator=collator,
        processing_class=setup.tokenizer,
        callbacks=[MetricsJsonlCallback(os.path.join(options.save_path, "metrics.jsonl"))],
        beta=options.beta, reduction=reduction,
        nll_loss_coef=options.nll_loss_coef, ref_model=ref_model)
    result = trainer.train()
    tokens = sum(len(e["chosen"].input_ids) + len(e["rejected"].input_ids) for e in examples)
    return _finish(trainer, result, options, "train_dpo", tokens, len(examples), start)


def train_scalar_critic(options: PreferenceOptions) -> Dict[str, Any]:
    """A scalar-head critic (``--critic_head regression``, ``value`` or ``vlm_regression``, see
    :mod:`sweet_rl.training.heads` and :mod:`sweet_rl.training.vlm_heads`). No reference
    model: the score is the head's output."""
    start = time.time()
    kind = options.critic_head
    if kind not in ("regression", "value", "vlm_regression"):
        raise ValueError(f"--critic_head {kind}: train_scalar_critic trains the regression, "
                         "value or vlm_regression head (the log-prob critic is "
                         "train_preference)")
    pairs = _read_pairs(options) if kind == "regression" else None  # before torch, as above
    from sweet_rl.training.data import tokenize_pairs
    from sweet_rl.training.head_trainer import (ScalarHeadTrainer, ValueCollator,
                                                load_for_training, read_value_rows,
                                                tokenize_value_rows)
    from sweet_rl.training.collators import PreferenceCollator
    from sweet_rl.training.trainer import MetricsJsonlCallback

    setup = _setup(options)
    options = setup.options
    pad_id = setup.tokenizer.pad_token_id
    processing, head_info = setup.tokenizer, None
    if kind == "regression":  # the log-prob critic's pairs, read and cut the same way
        examples = tokenize_pairs(pairs, setup.seq)
        collator = PreferenceCollator(pad_id)
        tokens = sum(len(e["chosen"].input_ids) + len(e["rejected"].input_ids)
                     for e in examples)
    elif kind == "value":  # one row per assistant turn; the hold-out keeps whole trajectories out
        rows = _held_out(read_value_rows(options.dataset), options, "trajectories")
        examples = tokenize_value_rows(rows, setup.seq)
        collator = ValueCollator(pad_id)
        tokens = sum(len(e["sequence"].input_ids) for e in examples)
    else:
        examples, collator, tokens, processing, head_info = _vlm_data(options, pad_id)
    args = setup.training_arguments()  # sets up distributed
    model = load_for_training(options.pretrain, options, setup.use_deepspeed, kind)
    trainer = ScalarHeadTrainer(
        model=model, args=args, train_dataset=examples, data_collator=collator,
        processing_class=processing,  # saved with the model: the VLM critic's processor
        callbacks=[MetricsJsonlCallback(os.path.join(options.save_path, "metrics.jsonl"))],
        kind=kind, max_len=options.max_len, head_info=head_info)
    result = trainer.train()
    return _finish(trainer, result, options, "train_dpo", tokens, len(examples), start)


def _vlm_data(options: PreferenceOptions, pad_id: int):
    """The VLM critic's pairs as a lazily encoded data set, its collator, its token count,
    its processor and the ``critic_head.json`` entries of its image size bound. Every item's
    length is worked out here (from the pictures' sizes, no pixels decoded), so a picture
    too big for ``--max_len`` stops the run before anything is written."""
    from transformers import AutoProcessor

    from sweet_rl.training.head_trainer import VLMPairCollator, VLMPairDataset
    from sweet_rl.training.vlm_heads import DEFAULT_MAX_PIXELS, VLMEncoder
    from sweet_rl.training.vlm_pairs import read_vlm_pairs

    pairs = _held_out(read_vlm_pairs(options.dataset), options, "pairs")
    processor = AutoProcessor.from_pretrained(options.pretrain)
    encoder = VLMEncoder(processor, options.max_len, DEFAULT_MAX_PIXELS)
    tokens = sum(encoder.length(item) for pair in pairs for item in pair)
    return (VLMPairDataset(pairs, encoder), VLMPairCollator(pad_id, encoder.image_token_id),
            tokens, processor, {"max_pixels": encoder.max_pixels})


def train_sft(options: SFTOptions) -> Dict[str, Any]:
    """Supervised fine-tuning on successful trajectories (rejection fine-tuning baseline)."""
    from sweet_rl.training.data import read_sft_trajectories, tokenize_sft

    start = time.time()
    options.check_required()
    # read and checked before torch: a bad line stops the run at once
    trajectories = _held_out(read_sft_trajectories(options.dataset, options.min_reward),
                             options, "examples")
    from transformers import Trainer

    from sweet_rl.training.collators import SFTCollator
    from sweet_rl.training.trainer import MetricsJsonlCallback, load_causal_lm

    setup = _setup(options)
    options = setup.options
    examples = tokenize_sft(trajectories, setup.seq)
    args = setup.training_arguments()
    model = load_causal_lm(options.pretrain, options, setup.use_deepspeed)
    trainer = Trainer(
        model=model, args=args, train_dataset=examples,
        data_collator=SFTCollator(setup.tokenizer.pad_token_id), processing_class=setup.tokenizer,
        callbacks=[MetricsJsonlCallback(os.path.join(options.save_path, "metrics.jsonl"))])
    result = trainer.train()
    tokens = sum(len(e["sequence"].input_ids) for e in examples)
    return _finish(trainer, result, options, "train_sft", tokens, len(examples), start)
