"""The strict parser of sweet_rl.flags: every form the original's commands use is read as they
mean it, everything else is refused before any work with one line."""

import json
from dataclasses import dataclass
from typing import List, Optional, Union

import pytest

from sweet_rl.flags import (FlagError, HelpRequested, Options, UsageError, flag, group,
                            load_options, parse_command_line)
from sweet_rl.flags.help import render_help


@dataclass(kw_only=True)
class Judge(Options):
    """Judge: a stand-in group, held twice."""

    critic_type: str = flag("which critic; --model_id names it.", "logprob",
                            choices=("logprob", "random"))
    model_id: Optional[str] = flag("the critic.", None)


@dataclass(kw_only=True)
class Shard(Options):
    """Sharding: a stand-in group with its own check."""

    num_shards: int = flag("how many blocks.", 1)

    def check(self):
        if self.num_shards < 1:
            raise ValueError(f"--num_shards must be at least 1, got {self.num_shards}")


@dataclass(kw_only=True)
class Stage(Shard, Judge):
    """Do the thing to INPUT_PATH."""

    POSITIONAL = ("input_path", "output_path", "k", "bf16")
    input_path: str = flag("the input.", aliases=("saved_path",))
    output_path: Optional[str] = flag("the output.", None)
    k: int = flag("rollouts.", 1)
    bf16: bool = flag("half precision.", False)
    save_steps: int = flag("steps.", -1)
    rate: float = flag("a rate.", 0.5)
    max_new_tokens: int = flag("tokens.", 16)
    hostname: Optional[str] = flag("a host.", None)
    no_prompt: bool = flag("a flag whose name starts with no.", False)
    use_wandb: Union[str, bool, None] = flag("alone: on; with a value: a key.", None)
    ns: List[int] = flag("a list.", [1, 2])
    api_key: Optional[str] = flag("a key.", None, secret=True)
    pick: Judge = group(Judge, prefix="pick_", rename={"model_id": "pick_critic"})


def values(args):
    return parse_command_line(Stage, args).flags(secrets=True)


# (command line, the values it gives) -- the forms of the original's commands
VALID = [
    (["in.jsonl"], {"input_path": "in.jsonl", "output_path": None}),
    (["in", "out"], {"input_path": "in", "output_path": "out"}),
    (["in", "--bf16"], {"bf16": True}),
    (["in", "--bf16", "False"], {"bf16": False}),
    (["in", "--bf16", "true", "--k", "3"], {"bf16": True, "k": 3}),
    (["in", "--bf16", "--k", "3"], {"bf16": True, "k": 3}),
    (["in", "--bf16=false"], {"bf16": False}),
    (["in", "--save_steps", "-1"], {"save_steps": -1}),
    (["in", "--save_steps=-3"], {"save_steps": -3}),
    (["in", "--rate", "-0.5"], {"rate": -0.5}),
    (["in", "--rate", "4"], {"rate": 4}),  # an integer stays one (the sidecar records 4)
    (["in", "--rate", "2e-7"], {"rate": 2e-7}),
    (["in", "--max-new-tokens", "3"], {"max_new_tokens": 3}),
    (["in", "--nobf16"], {"bf16": False}),
    (["in", "--no_prompt"], {"no_prompt": True}),
    (["--input_path", "in", "out"], {"input_path": "in", "output_path": "out"}),
    (["--output_path", "out", "in"], {"input_path": "in", "output_path": "out"}),
    (["in", "out", "7", "true"], {"k": 7, "bf16": True}),
    (["in", "--hostname=--odd"], {"hostname": "--odd"}),
    (["---input_path", "in"], {"input_path": "in"}),  # the original README's ---train
    (["in", " ", "out"], {"input_path": "in", "output_path": "out"}),  # its stray "\ "
    (["--saved_path", "in"], {"input_path": "in"}),
    (["in", "--saved_path", "in"], {"input_path": "in"}),  # agreeing names: fine
    (["in", "--use_wandb"], {"use_wandb": True}),
    (["in", "--use_wandb", "1e5"], {"use_wandb": "1e5"}),  # a key stays text
    (["in", "--use_wandb", "--bf16"], {"use_wandb": True, "bf16": True}),
    (["in", "--ns", "8"], {"ns": [8]}),
    (["in", "--ns", "1,4,16"], {"ns": [1, 4, 16]}),
    (["in", "--hostname", "None"], {"hostname": None}),
    (["in", "--k", "2", "--k", "5"], {"k": 5}),  # the last one wins
    (["in", "--", "--out"], {"output_path": "--out"}),
    (["in", "--pick_critic_type", "random", "--pick_critic", "m"],
     {"pick_critic_type": "random", "pick_critic": "m", "critic_type": "logprob"}),
    (["in", "--api_key", "s3cr3t"], {"api_key": "s3cr3t"}),
]


@pytest.mark.parametrize("args,expected", VALID, ids=lambda v: " ".join(v) if isinstance(v, list)
                         else "")
def test_the_originals_forms_give_what_they_mean(args, expected):
    got = values(args)
    assert {key: got[key] for key in expected} == expected
    assert type(got["rate"]) is type(expected.get("rate", 0.5))


INVALID = [
    (["in", "--lerning_rate", "1"], "unknown flag --lerning_rate; valid flags: --input_path, "
     "--output_path, --k, --bf16, --critic_type"),
    (["in", "--hostnme", "x"], "unknown flag --hostnme (did you mean --hostname?)"),
    (["in", "--save-step", "3"], "unknown flag --save-step (did you mean --save_steps?)"),
    (["in", "--noprompt"], "unknown flag --noprompt (did you mean --no_prompt?)"),
    (["in", "--nok"], "flag --nok sets nothing: --k is not a true/false flag"),
    (["in", "-k", "2"], None),  # -k is --k (one dash is accepted); see VALID_ONE_DASH
    (["a", "b", "3", "true", "e"], "unexpected argument 'e': arguments without a flag fill "
     "input_path, output_path, k, bf16 in that order"),
    (["--k", "2", "a", "b", "false", "x"], "unexpected argument 'x'"),
    ([], "missing required argument input_path (give it as --input_path (or --saved_path) VALUE "
     "or by position)"),
    (["in", "--k"], "flag --k needs a value (--k VALUE or --k=VALUE)"),
    (["in", "--k", "--bf16"], "flag --k needs a value"),
    (["in", "--k", "many"], "--k must be an integer, got 'many'"),
    (["in", "--k", "2.5"], "--k must be an integer, got '2.5'"),
    (["in", "--rate", "fast"], "--rate must be a number, got 'fast'"),
    (["in", "--bf16=maybe"], "--bf16 must be true or false, got 'maybe'"),
    (["in", "--ns", "1,x"], "--ns must be a comma-separated list of integers, got 'x'"),
    (["in", "--critic_type", "judge"], "--critic_type must be one of logprob, random, got "
     "'judge'"),
    (["in", "--pick_critic_type", "x"], "--pick_critic_type must be one of logprob, random"),
    (["in", "--num_shards", "0"], "--num_shards must be at least 1, got 0"),
    (["a", "--saved_path", "b"], "--saved_path and INPUT_PATH name the same flag "
     "(--input_path) and disagree: 'b' vs 'a'; give one of them"),
    (["--saved_path", "b", "a"], "disagree: 'b' vs 'a'"),
]


@pytest.mark.parametrize("args,message", [c for c in INVALID if c[1]],
                         ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_bad_command_lines_are_refused_with_one_line(args, message):
    with pytest.raises(ValueError) as err:
        parse_command_line(Stage, args)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_one_dash_names_and_help_anywhere():
    assert values(["in", "-k", "2"])["k"] == 2
    for args in (["--help"], ["-h"], ["in", "--k", "2", "--help"], ["--no_such", "1", "-h"],
                 ["in", "--", "--help"]):
        with pytest.raises(HelpRequested):
            parse_command_line(Stage, args)


def test_the_sidecar_values_leave_secrets_out():
    opts = parse_command_line(Stage, ["in", "--api_key", "s3cr3t"])
    assert "api_key" not in opts.flags() and opts.flags(secrets=True)["api_key"] == "s3cr3t"
    assert opts.pick == Judge() and opts.flags()["pick_critic"] is None


def test_a_config_file_sits_between_defaults_and_the_command_line(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"_comment": "ignored", "k": 4, "rate": "2e-7", "bf16": True,
                                  "ns": "3,5", "pick_critic": "m"}))
    opts = parse_command_line(Stage, ["in", "--config", str(config), "--k", "9"])
    assert (opts.k, opts.rate, opts.bf16, opts.ns, opts.pick.model_id) == (9, 2e-7, True,
                                                                         [3, 5], "m")
    assert load_options(Stage, config=str(config), input_path="x", bf16=False).bf16 is False
    config.write_text(json.dumps({"rat": 1}))
    with pytest.raises(UsageError, match=r"c.json: unknown key 'rat' \(did you mean rate\?\)"):
        parse_command_line(Stage, ["in", "--config", str(config)])
    config.write_text(json.dumps({"k": "many"}))
    with pytest.raises(UsageError, match="key 'k': --k must be an integer, got 'many'"):
        parse_command_line(Stage, ["in", "--config", str(config)])
    config.write_text("[1]")
    with pytest.raises(UsageError, match="expected a JSON object"):
        parse_command_line(Stage, ["in", "--config", str(config)])
    with pytest.raises(FileNotFoundError, match="config file not found"):
        parse_command_line(Stage, ["in", "--config", str(tmp_path / "none.json")])


def test_options_made_in_python_are_checked_too():
    assert Stage(input_path="x", k=2).k == 2
    with pytest.raises(FlagError, match="--k must be an integer, got '2'"):
        Stage(input_path="x", k="2")
    with pytest.raises(FlagError, match="--k must be an integer, got True"):
        Stage(input_path="x", k=True)
    assert Stage(input_path="x", rate=1).rate == 1  # an int is a number
    with pytest.raises(TypeError):
        Stage()  # input_path is required


def test_help_shows_every_flag_once_with_its_type_default_and_text():
    text = render_help(Stage, "stage.py")
    assert text.startswith("usage: stage.py INPUT_PATH [--NAME VALUE ...]\n\nDo the thing")
    assert "  INPUT_PATH, --input_path, --saved_path  (str; required)\n      the input." in text
    assert "  --rate  (float; default: 0.5)\n      a rate." in text
    assert "  --ns  (list of int; default: 1,2)\n" in text
    assert '  --critic_type  (str; default: "logprob"; one of: logprob, random)\n' in text
    # the held group: its own section, its flags named in context, also in their help
    assert "Judge: a stand-in group, held twice. (--pick_*)" in text
    assert "  --pick_critic  (str or None; default: None)\n" in text
    assert "which critic; --pick_critic names it." in text
    assert text.count("--pick_critic_type  (") == 1
