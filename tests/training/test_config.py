"""DeepSpeed configs, the original's logging flags, the held-out share and gradient
accumulation (config files and precedence: tests/training/test_options.py)."""

import dataclasses
import json
import os

import pytest

from sweet_rl.training import config as cfg
from sweet_rl.training.options import PreferenceOptions, SFTOptions
from tests.conftest import REPO_ROOT

CONFIGS = REPO_ROOT / "configs"


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_files_match_the_builtin_copy(stage):
    with open(CONFIGS / f"ds_zero{stage}.json") as handle:
        assert json.load(handle) == cfg.BUILTIN_DS_CONFIGS[stage]
    config = cfg.deepspeed_config(stage)
    assert config["zero_optimization"]["stage"] == stage
    assert (
        config["train_micro_batch_size_per_gpu"] == "auto" and config["bf16"]["enabled"] == "auto"
    )
    if stage == 3:
        assert config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    assert cfg.deepspeed_config(1)["zero_optimization"]["stage"] == 1


def test_gradient_accumulation_from_batch_sizes():
    assert cfg.gradient_accumulation_steps(8, 1, 1) == 8
    assert cfg.gradient_accumulation_steps(8, 1, 8) == 1
    assert cfg.gradient_accumulation_steps(8, 2, 2) == 2
    with pytest.raises(ValueError):
        cfg.gradient_accumulation_steps(8, 3, 1)
    with pytest.raises(ValueError):
        cfg.gradient_accumulation_steps(8, 1, 16)


def test_flash_attn_falls_back_to_sdpa_when_absent(monkeypatch):
    monkeypatch.setattr(cfg.importlib.util, "find_spec", lambda name: None)
    assert cfg.attention_implementation(True) == "sdpa"
    assert cfg.attention_implementation(False) == "sdpa"
    monkeypatch.setattr(cfg.importlib.util, "find_spec", lambda name: object())
    assert cfg.attention_implementation(True) == "flash_attention_2"


def test_training_arguments_schedule_accumulation_and_checkpointing(tmp_path):
    """The Trainer's own optimizer and scheduler from our TrainingArguments: lr 1.0, 10 steps,
    warmup ratio 0.2 (2 steps), floor 0.1. By hand:
        warmup  lr(0) = 0, lr(1) = 0.5, lr(2) = 1.0
        cosine  lr(t) = 0.1 + 0.9 x 0.5 x (1 + cos(pi (t - 2) / 8)): lr(6) = 0.55, lr(10) = 0.1
    """
    import math

    import torch
    from transformers import Trainer

    from sweet_rl.training.trainer import training_arguments

    options = PreferenceOptions(save_path=str(tmp_path), learning_rate=1.0,
                                lr_warmup_ratio=0.2, min_lr_ratio=0.1, gradient_checkpointing=True,
                                train_batch_size=8, micro_train_batch_size=2)
    args = training_arguments(options, cfg.gradient_accumulation_steps(
        options.train_batch_size, options.micro_train_batch_size, 1), None)
    assert args.gradient_accumulation_steps == 4 and args.per_device_train_batch_size == 2
    assert getattr(args, "activation_checkpointing", None) or args.gradient_checkpointing
    assert args.report_to in ([], ["none"], "none") and args.deepspeed is None

    trainer = Trainer(model=torch.nn.Linear(2, 1), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    lrs = []
    for _ in range(11):
        lrs.append(trainer.lr_scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    expected = [0.0, 0.5, 1.0] + [
        0.1 + 0.45 * (1 + math.cos(math.pi * (t - 2) / 8)) for t in range(3, 11)
    ]
    assert lrs == pytest.approx(expected, abs=1e-9)
    assert lrs[6] == pytest.approx(0.55) and lrs[10] == pytest.approx(0.1)


def test_original_logging_flags(monkeypatch, caplog):
    """--eval_steps: a notice (no evaluation split here). --use_wandb KEY: report_to gains
    wandb, the key goes to wandb through WANDB_API_KEY and leaves the options (so no sidecar
    holds it), the project defaults to openrlhf's name. Without the package: a clear error.
    The "installed" case fakes only the package lookup (the real run is in
    tests/fidelity/test_commands_readme.py)."""
    import importlib.util

    from sweet_rl import notices

    monkeypatch.setattr(notices, "_NOTICES_GIVEN", set())
    options = PreferenceOptions(eval_steps=-1)
    with caplog.at_level("WARNING"):
        options = cfg.apply_original_flags(options, "train_dpo")
        cfg.apply_original_flags(options, "train_dpo")
    assert [r.getMessage() for r in caplog.records].count(
        "--eval_steps ignored: the held-out share of --dataset (--eval_holdout, the original's "
        "first 3%) is kept out of training but not evaluated here") == 1
    assert options.report_to == ["none"] and options.use_wandb is None

    real_find_spec = importlib.util.find_spec
    if real_find_spec("wandb") is None:
        with pytest.raises(ValueError, match="--use_wandb needs the wandb package"):
            cfg.apply_original_flags(PreferenceOptions(use_wandb="KEY"), "train_dpo")
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "wandb" else real_find_spec(name, *a))
    for key in ("WANDB_API_KEY", "WANDB_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    options = cfg.apply_original_flags(PreferenceOptions(use_wandb="s3cret"), "train_dpo")
    assert options.report_to == ["wandb"] and options.use_wandb is True
    assert "s3cret" not in json.dumps(dataclasses.asdict(options))
    assert (
        os.environ["WANDB_API_KEY"] == "s3cret"
        and os.environ["WANDB_PROJECT"] == "openrlhf_train_dpo"
    )
    monkeypatch.setenv("WANDB_API_KEY", "already-logged-in")  # a key already there wins
    options = cfg.apply_original_flags(SFTOptions(use_wandb="other", report_to=["tensorboard"]),
                                       "train_sft")
    assert options.report_to == ["tensorboard", "wandb"]
    assert os.environ["WANDB_API_KEY"] == "already-logged-in"
    monkeypatch.delenv("WANDB_API_KEY")
    cfg.apply_original_flags(PreferenceOptions(use_wandb="True"), "train_dpo")  # bare flag
    assert "WANDB_API_KEY" not in os.environ  # wandb's own login is used


def test_holdout_keeps_the_first_three_percent_out_as_the_original_fork():
    # openrlhf's blending_datasets: eval = first int(len * 0.03) rows, train = the rest.
    trained, held = cfg.split_holdout(list(range(100)), PreferenceOptions().eval_holdout)
    assert held == [0, 1, 2] and trained == list(range(3, 100))
    assert cfg.split_holdout(list(range(33)), 0.03) == (list(range(33)), [])  # int(0.99) = 0
    assert cfg.split_holdout([1, 2], 0.0) == ([1, 2], [])
    with pytest.raises(ValueError, match="eval_holdout"):
        cfg.split_holdout([1], 1.0)
