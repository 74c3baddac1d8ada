"""The typed training options: built once from flags and config file (sweet_rl.flags),
checked with the flag's name in every error, recorded unchanged in the sidecar."""

import dataclasses
import json

import pytest

from sweet_rl.flags import flag_table, load_options, parse_command_line
from sweet_rl.training.options import PreferenceOptions, SFTOptions
from tests.conftest import REPO_ROOT

CRITIC = str(REPO_ROOT / "configs" / "critic_backend.json")


def test_each_stage_has_its_flags_once_with_its_own_defaults():
    dpo = {spec.name for spec in flag_table(PreferenceOptions)}
    sft = {spec.name for spec in flag_table(SFTOptions)}
    assert dpo - sft == {"ref_pretrain", "beta", "mean_log_prob", "per_turn_mean",
                         "nll_loss_coef", "chosen_key", "rejected_key", "prompt_key",
                         "ref_in_memory", "critic_head"}
    assert sft - dpo == {"min_reward"}
    assert [s.name for s in flag_table(PreferenceOptions) if not s.configurable] == ["local_rank"]
    assert SFTOptions().response_template == "<|start_header_id|>assistant<|end_header_id|>"
    assert PreferenceOptions().response_template is None


def test_flags_override_the_config_file_which_overrides_the_defaults(tmp_path):
    """The sidecar holds ``asdict`` of the options: defaults < config file < flags."""
    options = parse_command_line(PreferenceOptions, [
        "--config", CRITIC, "--learning_rate", "1e-3", "--bf16", "False", "--max_epochs", "4"])
    recorded = dataclasses.asdict(options)
    file = {k: v for k, v in json.loads(open(CRITIC).read()).items() if not k.startswith("_")}
    defaults = dataclasses.asdict(PreferenceOptions())
    assert recorded == {**defaults, **file, "learning_rate": 1e-3, "bf16": False, "max_epochs": 4}
    assert recorded["beta"] == 0.1 and recorded["max_len"] == 8192  # the file's
    assert recorded["chosen_key"] == "chosen" and recorded["local_rank"] == -1  # defaults
    assert type(recorded["max_epochs"]) is int and type(recorded["learning_rate"]) is float
    assert options.reduction == "mean"  # the file's mean_log_prob
    assert dataclasses.replace(options, per_turn_mean=True).reduction == "per_turn_mean"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_len = 1
    # the same from Python; a config named by its file name is found in configs/
    assert load_options(PreferenceOptions, config="critic_backend.json", learning_rate=1e-3,
                        bf16=False, max_epochs=4) == options


@pytest.mark.parametrize("name", ["critic_backend", "critic_frontend", "agent_dpo_backend",
                                  "agent_dpo_frontend", "multiturn_dpo_backend", "rft_backend"])
def test_the_repository_configs_hold_the_paper_values(name):
    kind = SFTOptions if name.startswith("rft") else PreferenceOptions
    options = load_options(kind, config=str(REPO_ROOT / "configs" / f"{name}.json"))
    assert options.learning_rate == 2e-7 and options.zero_stage == 3 and options.bf16 is True
    assert (options.train_batch_size, options.micro_train_batch_size) == (8, 1)
    expected = {"critic_backend": (4, 8192), "critic_frontend": (8, 8192),
                "agent_dpo_backend": (1, 16384)}.get(name)
    if expected:
        assert (options.max_epochs, options.max_len) == expected
    if name == "agent_dpo_backend":
        assert options.nll_loss_coef == 0.01 and options.beta == 0.1


def test_a_config_key_that_is_no_flag_or_the_launchers_is_refused(tmp_path):
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"learning_rat": 1.0, "_comment": "ignored"}))
    with pytest.raises(ValueError, match="unknown key 'learning_rat'"):
        load_options(PreferenceOptions, config=str(path))
    path.write_text(json.dumps({"local_rank": 3}))
    with pytest.raises(ValueError, match="unknown key 'local_rank'"):
        load_options(PreferenceOptions, config=str(path))
    path.write_text(json.dumps({"learning_rate": "2e-7", "max_epochs": "4", "bf16": "true"}))
    loose = load_options(PreferenceOptions, config=str(path))  # text in a file, typed
    assert (loose.learning_rate, loose.max_epochs, loose.bf16) == (2e-7, 4, True)


@pytest.mark.parametrize("args,message", [
    (["--max_len", "long"], "--max_len must be an integer, got 'long'"),
    (["--train_batch_size", "2.5"], "--train_batch_size must be an integer, got '2.5'"),
    (["--learning_rate", "fast"], "--learning_rate must be a number, got 'fast'"),
    (["--bf16=maybe"], "--bf16 must be true or false, got 'maybe'"),
    (["--micro_train_batch_size", "0"], "--micro_train_batch_size must be at least 1, got 0"),
    (["--lr_warmup_ratio", "1.5"], "--lr_warmup_ratio must be in [0, 1), got 1.5"),
    (["--eval_holdout", "1.0"], "--eval_holdout must be in [0, 1), got 1.0"),
])
def test_a_bad_value_names_its_flag(args, message):
    with pytest.raises(ValueError) as err:
        parse_command_line(PreferenceOptions, args)
    assert str(err.value) == message


def test_options_made_in_python_are_typed_too():
    with pytest.raises(ValueError, match="--seed must be an integer, got True"):
        PreferenceOptions(seed=True)
    with pytest.raises(ValueError, match="--report_to must be a comma-separated list of texts, "
                                         "got 'none'"):
        PreferenceOptions(report_to="none")


def test_critic_head_is_checked_and_named():
    """logprob (today's critic) by default; an unknown name, or a log-prob-only flag with a
    head, stops with the flag's name."""
    assert PreferenceOptions().critic_head == "logprob"
    assert PreferenceOptions(critic_head="value", mean_log_prob=True).critic_head == "value"
    with pytest.raises(ValueError) as err:
        PreferenceOptions(critic_head="linear")
    assert str(err.value) == ("--critic_head must be one of logprob, regression, value, "
                              "vlm_regression, got 'linear'")
    for flag, value in (("nll_loss_coef", 0.01), ("ref_pretrain", "other"),
                        ("ref_in_memory", True)):
        with pytest.raises(ValueError, match=f"--{flag} needs --critic_head logprob"):
            PreferenceOptions(critic_head="regression", **{flag: value})


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
