"""The typed training options: built once from flags and config file, checked with the flag's
name in every error, recorded unchanged in the sidecar."""

import dataclasses

import pytest

from sweet_rl.training import config as cfg
from sweet_rl.training.options import PreferenceOptions, SFTOptions, TrainingOptions
from tests.conftest import REPO_ROOT

CRITIC = str(REPO_ROOT / "configs" / "critic_backend.json")


def test_the_defaults_are_the_dataclass_defaults():
    assert cfg.DPO_DEFAULTS == PreferenceOptions.flag_defaults()
    assert set(cfg.DPO_DEFAULTS) == set(cfg.COMMON_DEFAULTS) | {
        "ref_pretrain", "beta", "mean_log_prob", "per_turn_mean", "nll_loss_coef", "chosen_key",
        "rejected_key", "prompt_key", "ref_in_memory", "critic_head"}
    assert set(cfg.SFT_DEFAULTS) == set(cfg.COMMON_DEFAULTS) | {"min_reward"}
    assert "local_rank" not in cfg.DPO_DEFAULTS  # a config file may not set it
    assert SFTOptions().response_template == "<|start_header_id|>assistant<|end_header_id|>"
    assert TrainingOptions().response_template is None


def test_built_options_record_what_the_merged_flags_were():
    """The sidecar holds ``asdict`` of the options: the same keys and values as the merged
    defaults < config file < flags, plus local_rank."""
    explicit = {"learning_rate": 1e-3, "bf16": False, "max_epochs": 4, "beta": None,
                "config": CRITIC, "local_rank": -1}
    options = cfg.build_options(PreferenceOptions, explicit, CRITIC, "train_dpo", local_rank=-1)
    merged = cfg.resolve_options(explicit, CRITIC, cfg.DPO_DEFAULTS)
    assert dataclasses.asdict(options) == dict(merged, local_rank=-1, use_wandb=None)
    recorded = dataclasses.asdict(options)
    assert type(recorded["max_epochs"]) is int and type(recorded["learning_rate"]) is float
    assert options.reduction == "mean"  # the file's mean_log_prob
    assert dataclasses.replace(options, per_turn_mean=True).reduction == "per_turn_mean"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_len = 1


def test_loose_values_become_their_types():
    options = PreferenceOptions(max_len="512", train_batch_size=8.0, learning_rate="2e-7",
                                bf16="false", flash_attn="True", gradient_checkpointing=1,
                                pretrain=7, eval_steps="-1", local_rank=None)
    assert options.max_len == 512 and options.train_batch_size == 8
    assert options.learning_rate == 2e-7
    assert options.bf16 is False and options.flash_attn is True
    assert options.gradient_checkpointing is True
    assert options.pretrain == "7" and options.eval_steps == -1 and options.local_rank == -1


@pytest.mark.parametrize("values,message", [
    ({"max_len": "long"}, "--max_len must be an integer, got 'long'"),
    ({"train_batch_size": 2.5}, "--train_batch_size must be an integer, got 2.5"),
    ({"seed": True}, "--seed must be an integer, got True"),
    ({"learning_rate": "fast"}, "--learning_rate must be a number, got 'fast'"),
    ({"bf16": "maybe"}, "--bf16 must be true or false, got 'maybe'"),
    ({"micro_train_batch_size": 0}, "--micro_train_batch_size must be at least 1, got 0"),
    ({"lr_warmup_ratio": 1.5}, "--lr_warmup_ratio must be in [0, 1), got 1.5"),
    ({"eval_holdout": 1.0}, "--eval_holdout must be in [0, 1), got 1.0"),
    ({"report_to": 3}, "--report_to must be a name or a list of names, got 3"),
])
def test_a_bad_value_names_its_flag(values, message):
    with pytest.raises(ValueError) as err:
        PreferenceOptions(**values)
    assert str(err.value) == message


def test_critic_head_is_checked_and_named():
    """logprob (today's critic) by default; a head name in any case; an unknown name, or a
    log-prob-only flag with a head, stops with the flag's name."""
    assert PreferenceOptions().critic_head == "logprob"
    assert PreferenceOptions(critic_head=" Regression ").critic_head == "regression"
    assert PreferenceOptions(critic_head="value", mean_log_prob=True).critic_head == "value"
    with pytest.raises(ValueError) as err:
        PreferenceOptions(critic_head="linear")
    assert str(err.value) == ("--critic_head must be one of logprob, regression, value, "
                              "vlm_regression, got 'linear'")
    for flag, value in (("nll_loss_coef", 0.01), ("ref_pretrain", "other"),
                        ("ref_in_memory", True)):
        with pytest.raises(ValueError, match=f"--{flag} needs --critic_head logprob"):
            PreferenceOptions(critic_head="regression", **{flag: value})


def test_the_command_line_stops_on_a_bad_value_before_any_work(tmp_path):
    """Nothing is read or written: the model and the data do not even exist."""
    from sweet_rl.cli.train_dpo import main

    save_path = tmp_path / "out"
    with pytest.raises(ValueError, match="--max_len must be an integer"):
        main(pretrain=str(tmp_path / "no-model"), dataset=str(tmp_path / "no.jsonl"),
             save_path=str(save_path), max_len="many")
    assert not save_path.exists()


def test_required_flags_are_checked_when_training_starts():
    SFTOptions()  # constructing without them is allowed: the wandb check comes first
    with pytest.raises(ValueError, match="--pretrain is required"):
        SFTOptions().check_required()
    with pytest.raises(ValueError, match="--save_path is required"):
        SFTOptions(pretrain="m", dataset="d").check_required()


def test_setup_decides_deepspeed_and_accumulation(tiny_model_dir, monkeypatch):
    """Outside the launcher a config's ZeRO-3 is ignored; accumulation from the batch sizes."""
    from sweet_rl.training.run import _setup

    for name in ("LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    options = PreferenceOptions(pretrain=tiny_model_dir, dataset="d", save_path="s",
                                zero_stage=3, train_batch_size=8, micro_train_batch_size=2)
    setup = _setup(options)
    assert setup.options is options and setup.use_deepspeed is False
    assert setup.deepspeed_config is None and setup.accumulation == 4
    assert setup.seq.tokenizer is setup.tokenizer and setup.tokenizer.pad_token_id is not None
