"""``--help`` a newcomer can read: every flag of every stage with its own complete description,
a readable type and its real default; help anywhere on the command line runs nothing; both
forms of the best-of-N stages' paths; the shell recipes' ``--help``."""

import functools
import importlib
import json
import os
import re
import subprocess
import sys
import time

import pytest

from sweet_rl.cli.main import STAGES
from sweet_rl.flags import flag_table, parse_command_line
from sweet_rl.flags.help import show_default
from tests.cli.test_flags import COMMANDS, options_of
from tests.conftest import REPO_ROOT

ENV = {"PAGER": "cat", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


@functools.lru_cache(maxsize=None)
def _help(command, flag="--help"):
    if command.startswith("sweet_rl/"):  # the miniature's and the demo's helpers
        args = ["-m", command[:-3].replace("/", ".")]
    else:
        args = [command]
    done = subprocess.run([sys.executable, *args, flag], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env=ENV)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def _blocks(text):
    """{flag name: (header line, description)} of every flag block of a help text."""
    blocks, name = {}, None
    for line in text.splitlines():
        match = re.match(r"  (?:[A-Z_]+, )?--(\w+)", line)
        if match:
            name = match.group(1)
            blocks[name] = [line.strip(), ""]
        elif name and line.startswith("      "):
            blocks[name][1] += " " + line.strip()
        elif not line.strip():
            name = None
    return {n: (h, " ".join(d.split())) for n, (h, d) in blocks.items()}


def _plain(text):
    return " ".join(re.sub(r"``(.+?)``", r"\1", text).split())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_its_own_full_description_type_and_real_default(command):
    cls = options_of(command)
    text = _help(command)
    assert text.startswith("usage: ")
    for bad in ("Optional[", "Union[", "``", "(not described)"):
        assert bad not in text, bad
    blocks = _blocks(text)
    flags = flag_table(cls)
    assert sorted(blocks) == sorted(spec.name for spec in flags)  # each flag once
    for spec in flags:
        header, description = blocks[spec.name]
        own = _plain(spec.help)
        if spec.prefix:  # a held group's help names its flags in context (--pick_*)
            own = re.sub(r"--(critic_type|score_tokens|judge_base_url)", rf"--{spec.prefix}\1",
                         own).replace("--model_id", "--pick_critic")
        assert description == own, spec.name  # the whole text, never cut, never another's
        facts = header.split("  (", 1)[1]
        assert facts.startswith(spec.kind.show() + "; ")
        if spec.required:
            assert "; required" in facts
        else:
            assert f"; default: {show_default(spec.default)}" in facts
        if spec.aliases:
            assert all(f"--{alias}" in header for alias in spec.aliases)


@pytest.mark.parametrize("command", ["scripts/evaluate_code.py", "scripts/train_dpo.py",
                                     "sweet_rl/recipes/mini/table.py"])
def test_dash_h_is_help_too(command):
    assert _help(command, "-h") == _help(command)


def test_usage_names_the_positional_arguments():
    assert _help("scripts/evaluate_code.py").startswith(
        "usage: evaluate_code.py SAVED_PATH [--NAME VALUE ...]\n\nGrade a trajectory file")
    assert _help("scripts/merge_shards.py").startswith(
        "usage: merge_shards.py SHARD_PATHS [SHARD_PATHS ...] --output_path OUTPUT_PATH ")
    assert "Arguments without a flag fill SAVED_PATH, K, TEMP_PATH, PREFERENCE_PATH," in \
        " ".join(_help("scripts/evaluate_html.py").split())


def test_training_defaults_are_the_options_defaults():
    from sweet_rl.training.options import PreferenceOptions, SFTOptions

    dpo, sft = _blocks(_help("scripts/train_dpo.py")), _blocks(_help("scripts/train_sft.py"))
    assert dpo["learning_rate"][0] == "--learning_rate  (float; default: 2e-07)"
    assert dpo["beta"][0].endswith(f"default: {PreferenceOptions().beta})")
    assert dpo["bf16"][0] == "--bf16  (bool; default: False)"
    assert dpo["report_to"][0] == "--report_to  (list of str; default: none)"
    template = json.dumps(SFTOptions().response_template)
    assert sft["response_template"][0].endswith(f"default: {template})")
    assert dpo["response_template"][0].endswith("default: None)")
    assert dpo["critic_head"][0].endswith(
        "one of: logprob, regression, value, vlm_regression)")


@pytest.mark.parametrize("args", [["in.jsonl", "--k", "2", "--help"], ["in.jsonl", "--", "--help"],
                                  ["--no_such_flag", "1", "-h"], ["-h", "in.jsonl"],
                                  ["--log_level", "LOUD", "--help"]])
def test_help_anywhere_runs_nothing(args, tmp_path):
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/evaluate_code.py"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == _help("scripts/evaluate_code.py") and os.listdir(tmp_path) == []


def test_the_console_command_shows_the_same_help():
    done = subprocess.run([sys.executable, "-m", "sweet_rl.cli.main", "simulate", "--help"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0
    assert done.stdout.replace("simulate_interactions ", "simulate_interactions.py ", 1) == \
        _help("scripts/simulate_interactions.py")
    assert set(STAGES) == {os.path.basename(c)[:-3] for c in COMMANDS if c.startswith("scripts")}


# -- both forms of the best-of-N stages' paths ---------------------------------------------

@pytest.mark.parametrize("stage", ["sample_best_of_n", "rank_best_of_n"])
def test_paths_by_position_or_by_flag(stage):
    cls = options_of(f"scripts/{stage}.py")
    assert cls.POSITIONAL[:2] == ("input_path", "output_path")
    flag = "--agent_model" if stage == "sample_best_of_n" else "--model_id"
    forms = [["IN", "OUT", flag, "M"],
             ["--input_path", "IN", "--output_path", "OUT", flag, "M"],
             ["--output_path", "OUT", "IN", flag, "M"],
             ["--input_path=IN", "OUT", flag, "M"]]
    for form in forms:
        opts = parse_command_line(cls, form)
        assert (opts.input_path, opts.output_path) == ("IN", "OUT"), form
    with pytest.raises(ValueError, match="missing required argument output_path"):
        parse_command_line(cls, ["IN", flag, "M"])
    assert _help(f"scripts/{stage}.py").startswith(
        f"usage: {stage}.py INPUT_PATH OUTPUT_PATH ")


def test_rank_writes_the_same_file_either_way(tmp_path):
    record = {"input": "i", "input_with_ground_truth": "g i", "older_output": "o", "reward": 1.0,
              "ground_truth": "g", "messages": [], "additional_outputs": ["a", "b"],
              "additional_reference_logprobs": [-1.0, -2.0],
              "additional_reference_logprobs_sum": [-1.0, -2.0]}
    (tmp_path / "sampled.jsonl").write_text(json.dumps(record) + "\n")
    for args in (["sampled.jsonl", "by_position.jsonl"],
                 ["--input_path", "sampled.jsonl", "--output_path", "by_flag.jsonl"]):
        done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/rank_best_of_n.py"),
                               *args, "--critic_type", "random"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, env=ENV)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "by_position.jsonl").read_text() == (tmp_path / "by_flag.jsonl").read_text()


# -- the shell recipes ---------------------------------------------------------------------

RECIPES = ["run_sweet_backend", "run_sweet_frontend", "run_baselines_backend", "run_demo",
           "vllm_env"]
# the miniature's scripts run its Python recipes (sweet-rl mini run / quick / build_agent /
# credit)
MINI_RECIPES = {"run_mini_reproduction": "run", "run_mini_quick": "quick",
                "build_mini_agent": "build_agent", "run_mini_credit": "credit"}


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_recipes_answer_help_at_once_and_write_nothing(recipe, flag, tmp_path):
    script = REPO_ROOT / "scripts" / f"{recipe}.sh"
    env = dict(ENV, HOME=str(tmp_path), OUT=str(tmp_path / "out"),
               OUTPUT_DIR=str(tmp_path / "out"), CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    started = time.monotonic()
    done = subprocess.run(["bash", str(script), flag], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30, env=env)
    assert time.monotonic() - started < 2
    assert done.returncode == 0 and done.stderr == "", done.stderr
    header = script.read_text().splitlines()[1].lstrip("# ")
    assert done.stdout.startswith(header + "\n")
    assert "set -euo pipefail" not in done.stdout and "#!/" not in done.stdout
    knobs = re.findall(r"^  ([A-Z][A-Z0-9_]*)=\$\{\1:-", done.stdout, re.M)
    assert knobs, done.stdout
    assert os.listdir(tmp_path) == []  # the working folder, HOME and every OUT stay empty


@pytest.mark.parametrize("recipe", sorted(MINI_RECIPES))
def test_the_miniature_scripts_answer_help_with_their_recipe_and_write_nothing(recipe, tmp_path):
    env = dict(ENV, HOME=str(tmp_path), OUT=str(tmp_path / "out"))
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / f"{recipe}.sh"), "--help"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    command = f"sweet-rl mini {MINI_RECIPES[recipe]}"
    assert done.stdout.startswith(f"usage: {command} [--NAME VALUE ...]")
    for knob in ("--jobs  (int or None; default: None)", "--threads  (int; default: 1)",
                 "--out  (str; default: "):
        assert knob in done.stdout
    assert "environment variable" in done.stdout
    assert os.listdir(tmp_path) == []  # the working folder, HOME and OUT stay empty


def test_the_helper_modules_are_commands():
    from sweet_rl.recipes.mini.commands import COMMANDS as MINI

    helpers = {name for name in os.listdir(REPO_ROOT / "sweet_rl" / "cli")
               if name.startswith("offline_demo")}
    assert {f"sweet_rl/cli/{name}" for name in helpers} <= set(COMMANDS)
    for name in helpers:  # each is runnable with python -m
        assert importlib.import_module(f"sweet_rl.cli.{name[:-3]}").main
    # the miniature's commands: each a module of its home with a main, and a flag table
    for name, (module, _) in MINI.items():
        path = f"sweet_rl/recipes/mini/{module}.py"
        if "__main__" in (REPO_ROOT / path).read_text():  # a step: its own flag table
            assert path in COMMANDS, name
        assert importlib.import_module(f"sweet_rl.recipes.mini.{module}").main
