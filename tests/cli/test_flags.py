"""The command-line check in ``run_cli``: a bad flag is refused before any work, and every form
fire accepts still passes.

fire's own parser is the oracle: ``fire.core._MakeParseFn`` is the code fire runs to match a
command line to a function (it returns what it could not consume, without calling anything),
so the check must accept exactly the command lines that leave nothing over.
"""

import importlib
import json
import os
import subprocess
import sys
import time

import pytest
from fire import core, decorators

from sweet_rl.cli.common import CommandLineError, check_command_line
from tests.conftest import REPO_ROOT


def fire_leftover(main, args):
    """What fire would leave unconsumed for ``main`` (None: fire refuses before calling)."""
    try:
        (_, kwargs), _, remaining, _ = core._MakeParseFn(main, decorators.GetMetadata(main))(
            list(args)
        )
    except core.FireError:
        return None
    return remaining


def fire_values(main, args):
    (positional, kwargs), _, remaining, _ = core._MakeParseFn(main, decorators.GetMetadata(main))(
        list(args)
    )
    assert remaining == []
    names = core.inspectutils.GetFullArgSpec(main).args
    return dict(zip(names, positional), **kwargs)


def ours(main, args):
    try:
        return check_command_line(main, args)
    except CommandLineError as err:
        return err


def stage(input_path, output_path=None, k=1, bf16=None, save_steps=-1, use_sum=False,
          max_new_tokens=16, hostname=None, no_prompt=False):
    """A stand-in with the kinds of parameters the stages have."""


# (command line, what fire passes to the function) -- each derived from fire's rules:
# a flag followed by a flag or by nothing is True; otherwise the next argument is its value,
# parsed as a Python literal (``-1`` is a value, not a flag: only ``-`` + letter is a flag).
VALID = [
    (["in.jsonl"], {"input_path": "in.jsonl"}),
    (["in.jsonl", "out.html"], {"input_path": "in.jsonl", "output_path": "out.html"}),
    (["in", "--bf16"], {"input_path": "in", "bf16": True}),
    (["in", "--bf16", "False"], {"input_path": "in", "bf16": False}),
    (["in", "--bf16", "--k", "3"], {"input_path": "in", "bf16": True, "k": 3}),
    (["in", "--save_steps", "-1"], {"input_path": "in", "save_steps": -1}),
    (["in", "--save_steps=-1"], {"input_path": "in", "save_steps": -1}),
    (["in", "--k", "-0.5"], {"input_path": "in", "k": -0.5}),
    (["in", "--max-new-tokens", "3"], {"input_path": "in", "max_new_tokens": 3}),
    (["in", "--nouse_sum"], {"input_path": "in", "use_sum": False}),
    (["in", "--no_prompt"], {"input_path": "in", "no_prompt": True}),  # a parameter named no_*
    (["-k", "2", "in"], {"input_path": "in", "k": 2}),  # the only parameter starting with k
    (["in", "-h"], {"input_path": "in", "hostname": True}),  # -h: the only one with h
    (["--input_path", "in", "out"], {"input_path": "in", "output_path": "out"}),
    (["in", "--hostname=--odd"], {"input_path": "in", "hostname": "--odd"}),
    (["in", "--bf16", "out.html"], {"input_path": "in", "bf16": "out.html"}),  # fire's rule
    (["in", "--nok"], {"input_path": "in", "k": False}),  # --noX for any X, at the end
    (["---input_path", "in"], {"input_path": "in"}),  # leading hyphens are stripped
]


@pytest.mark.parametrize(
    "args,values", VALID, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_valid_forms_pass_and_fire_agrees(args, values):
    assert fire_leftover(stage, args) == []
    assert ours(stage, args) == args  # handed to fire unchanged
    expected = dict(values)
    assert {k: v for k, v in fire_values(stage, args).items() if k in expected} == expected


INVALID = [
    (["in", "--lerning_rate", "1"], "unknown flag --lerning_rate; valid flags: --input_path"),
    (["in", "--bf16=True", "--hostnme", "x"], "unknown flag --hostnme (did you mean --hostname?)"),
    (["in", "--save-step", "3"], "unknown flag --save-step (did you mean --save_steps?)"),
    (["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],  # nine parameters, ten values
     "unexpected argument 'j': positional arguments fill the parameters not given by name"),
    (["--k", "2", "a", "b", "c", "d", "e", "f", "g", "h", "i"], "unexpected argument 'i'"),
    (["in", "--nouse_sum", "x"], "flag --nouse_sum takes no value"),
    (["in", "--noprompt"], "unknown flag --noprompt (did you mean --no_prompt?)"),
    ([], "missing required argument input_path"),
]


@pytest.mark.parametrize(
    "args,message", INVALID, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_bad_command_lines_are_refused_as_fire_would(args, message):
    leftover = fire_leftover(stage, args)
    assert leftover is None or leftover != []  # fire refuses them too (often after the run)
    err = ours(stage, args)
    assert isinstance(err, CommandLineError) and message in str(err)
    assert "\n" not in str(err)


def test_help_separators_and_fire_flags(capsys):
    assert ours(stage, ["--help"]) == ["--help"]
    # fire honours --help only first; later it would run the stage, then show help of None
    assert ours(stage, ["in", "--k", "2", "--help"]) == ["--help"]
    assert ours(stage, ["in", "--", "--verbose"]) == ["in", "--", "--verbose"]
    assert ours(stage, ["--", "--help"]) == ["--help"]  # no arguments needed for help
    assert ours(stage, ["in", "--", "--help"]) == ["--help"]  # fire would call stage("in") first
    assert ours(stage, ["--", "--completion"]) == ["--", "--completion"]  # inspects, never calls
    assert ours(stage, ["in", "-"]) == ["in", "-"]  # a separator with nothing after it
    err = ours(stage, ["in", "-", "out"])  # fire would hand "out" to the stage's result
    assert isinstance(err, CommandLineError) and "after the separator '-'" in str(err)
    # fire silently drops unknown flags after '--'; a stage flag put there would vanish
    err = ours(stage, ["in", "--", "--k", "3"])
    assert isinstance(err, CommandLineError) and "unknown flag --k after '--'" in str(err)
    # --separator (after --) changes fire's separator; the check follows it
    assert ours(stage, ["in", "-", "--", "--separator", "+"]) == [
        "in",
        "-",
        "--",
        "--separator",
        "+",
    ]
    assert isinstance(ours(stage, ["in", "+", "x", "--", "--separator", "+"]), CommandLineError)


def _stage_mains():
    names = ["download_data", "evaluate_code", "evaluate_html", "filter_websites",
             "generate_random_pairs", "merge", "prepare_frontend_tasks", "rank_best_of_n",
             "sample_best_of_n", "simulate", "train_dpo", "train_sft"]
    mains = {n: importlib.import_module(f"sweet_rl.cli.{n}").main for n in names}
    for n in ("visualize_dialogue_histories", "visualize_design_dialogue_histories"):
        mains[n] = importlib.import_module(f"visualizers.{n}").main
    return mains


def test_the_stages_accept_the_documented_forms():
    mains = _stage_mains()
    cases = [
        (
            "train_dpo",
            ["--bf16", "--save_steps", "-1", "--flash_attn", "--gradient_checkpointing"],
            {"bf16": True, "save_steps": -1, "flash_attn": True, "gradient_checkpointing": True},
        ),
        (
            "train_dpo",
            ["--bf16", "False", "--eval_steps", "-1", "--use_wandb", "1e5"],
            {"bf16": False, "eval_steps": -1, "use_wandb": "1e5"},
        ),  # a key stays text
        (
            "train_sft",
            ["--wandb_run_name", "007", "--max_epochs", "1"],
            {"wandb_run_name": "007", "max_epochs": 1},
        ),
        (
            "sample_best_of_n",
            ["in.jsonl", "out.jsonl", "--max-new-tokens", "3"],
            {"input_path": "in.jsonl", "output_path": "out.jsonl", "max_new_tokens": 3},
        ),
        (
            "rank_best_of_n",
            ["--model_id", "m", "--input_path", "i", "--output_path", "o", "--nouse_sum"],
            {"model_id": "m", "use_sum": False},
        ),
        (
            "evaluate_html",
            ["run.jsonl", "3", "/tmp/shots"],  # the original's positions
            {"saved_path": "run.jsonl", "k": 3, "temp_path": "/tmp/shots"},
        ),
        (
            "filter_websites",
            ["--saved_path", "a", "--filtered_path", "b", "--temp_path", "t"],
            {"saved_path": "a", "filtered_path": "b", "temp_path": "t"},
        ),
        ("visualize_design_dialogue_histories", ["run.jsonl"], {"input_path": "run.jsonl"}),
        (
            "visualize_dialogue_histories",
            ["--saved_path", "run.jsonl"],
            {"saved_path": "run.jsonl"},
        ),
    ]
    for name, args, values in cases:
        main = mains[name]
        assert fire_leftover(main, args) == [], name
        assert ours(main, args) == args, name
        got = fire_values(main, args)
        assert {k: got[k] for k in values} == values, name


def _typo(name):
    """``learning_rate`` -> ``learnign_rate``: the last two letters of the first word swapped."""
    word = name.split("_")[0]
    return name.replace(word, word[:-2] + word[-1] + word[-2], 1)


PROBE = ("import runpy, sys\n"
         "sys.argv = sys.argv[1:]\n"
         "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
         "except SystemExit as exit:\n"
         "    assert 'torch' not in sys.modules, 'the stage started: torch was imported'\n"
         "    raise\n")

# Every stage script, its stage function, and a command that would write OUT (or rewrite IN).
COMMANDS = {
    "scripts/download_data.py": ("download_data", ["IN", "OUT"]),
    "scripts/evaluate_code.py": ("evaluate_code", ["IN", "--preference_path", "OUT"]),
    "scripts/evaluate_html.py": ("evaluate_html", ["IN", "--preference_path", "OUT"]),
    "scripts/filter_websites.py": ("filter_websites", ["IN", "OUT"]),
    "scripts/generate_random_pairs_from_ranks.py": ("generate_random_pairs", ["IN", "OUT"]),
    "scripts/merge_shards.py": ("merge", ["IN", "--output_path", "OUT"]),
    "scripts/prepare_frontend_tasks.py": ("prepare_frontend_tasks", ["OUT", "--data_files", "IN"]),
    "scripts/rank_best_of_n.py": (
        "rank_best_of_n",
        ["--model_id", "M", "--input_path", "IN", "--output_path", "OUT"],
    ),
    "scripts/sample_best_of_n.py": ("sample_best_of_n", ["IN", "OUT", "--agent_model", "M"]),
    "scripts/simulate_interactions.py": (
        "simulate",
        ["--output_path", "OUT", "--max_new_tokens", "4"],
    ),
    "scripts/train_dpo.py": (
        "train_dpo",
        ["--pretrain", "M", "--dataset", "IN", "--save_path", "OUT"],
    ),
    "scripts/train_sft.py": (
        "train_sft",
        ["--pretrain", "M", "--dataset", "IN", "--save_path", "OUT"],
    ),
    "visualizers/visualize_dialogue_histories.py": ("visualize_dialogue_histories", ["IN", "OUT"]),
    "visualizers/visualize_design_dialogue_histories.py": (
        "visualize_design_dialogue_histories",
        ["IN", "OUT"],
    ),
}


def test_every_script_covered():
    scripts = {f"scripts/{p.name}" for p in (REPO_ROOT / "scripts").glob("*.py")}
    scripts |= {f"visualizers/{p.name}" for p in (REPO_ROOT / "visualizers").glob("visualize_*.py")}
    assert scripts == set(COMMANDS)


@pytest.mark.parametrize("script", sorted(COMMANDS))
def test_misspelled_flag_exits_2_at_once_and_touches_nothing(script, tmp_path):
    stage_name, command = COMMANDS[script]
    spec = core.inspectutils.GetFullArgSpec(_stage_mains()[stage_name])
    names = spec.args + spec.kwonlyargs  # merge's flags follow its *shard_paths
    real = max(names, key=len)
    typo = _typo(real)
    assert typo != real and typo not in names
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"task": {"problem_description": "p", "ground_truth": "g"},
                               "dialogue_history": [], "answer": ""}) + "\n")
    before = src.read_bytes()
    out = tmp_path / "out"
    args = [
        {"IN": str(src), "OUT": str(out), "M": str(tmp_path / "model")}.get(a, a) for a in command
    ]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", PROBE, str(REPO_ROOT / script), *args,
                             f"--{typo}", "1"], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: unknown flag --{typo} (did you mean --{real}?); "
                               f"valid flags: --{names[0]}, ")
    assert elapsed < 10  # about 0.2 s here: the stage never starts
    assert not out.exists() and not os.path.exists(str(out) + ".config.json")
    assert src.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["in.jsonl"]
