"""Every command's flags: each written once, with its help; the forms the original's commands
use read as they mean; a misspelled flag refused at once, before any work, by every script."""

import ast
import dataclasses
import importlib
import json
import os
import subprocess
import sys
import time
import typing

import pytest

from sweet_rl.flags import Options, flag, flag_table, parse_command_line
from sweet_rl.flags.spec import kind_of
from tests.conftest import REPO_ROOT

# every command: its entry module and its options class
COMMANDS = {
    "scripts/download_data.py": "sweet_rl.stages.download:DownloadOptions",
    "scripts/evaluate_code.py": "sweet_rl.stages.evaluate_code:EvaluateCodeOptions",
    "scripts/evaluate_html.py": "sweet_rl.stages.evaluate_html:EvaluateHtmlOptions",
    "scripts/filter_websites.py": "sweet_rl.stages.filter_websites:FilterOptions",
    "scripts/generate_random_pairs_from_ranks.py": "sweet_rl.stages.pairs:PairsOptions",
    "scripts/merge_shards.py": "sweet_rl.stages.merge:MergeOptions",
    "scripts/prepare_frontend_tasks.py": "sweet_rl.stages.prepare_frontend:PrepareFrontendOptions",
    "scripts/rank_best_of_n.py": "sweet_rl.stages.rank:RankOptions",
    "scripts/sample_best_of_n.py": "sweet_rl.stages.sample:SampleOptions",
    "scripts/simulate_interactions.py": "sweet_rl.stages.simulate_options:SimulateOptions",
    "scripts/train_dpo.py": "sweet_rl.training.options:PreferenceOptions",
    "scripts/train_sft.py": "sweet_rl.training.options:SFTOptions",
    "visualizers/visualize_dialogue_histories.py":
        "visualizers.visualize_dialogue_histories:ViewerOptions",
    "visualizers/visualize_design_dialogue_histories.py":
        "visualizers.visualize_design_dialogue_histories:DesignViewerOptions",
    "sweet_rl/recipes/mini/best_of_n.py": "sweet_rl.recipes.mini.best_of_n:MiniBestOfNOptions",
    "sweet_rl/recipes/mini/copy_check.py": "sweet_rl.recipes.mini.copy_check:CopyCheckOptions",
    "sweet_rl/recipes/mini/critic_check.py":
        "sweet_rl.recipes.mini.critic_check:CriticCheckOptions",
    "sweet_rl/recipes/mini/followup_check.py":
        "sweet_rl.recipes.mini.followup_check:FollowupCheckOptions",
    "sweet_rl/recipes/mini/subset.py": "sweet_rl.recipes.mini.subset:SubsetOptions",
    "sweet_rl/recipes/mini/table.py": "sweet_rl.recipes.mini.table:TableOptions",
    "sweet_rl/recipes/mini/warm_start.py": "sweet_rl.recipes.mini.warm_start:WarmStartOptions",
    "sweet_rl/cli/offline_demo.py": "sweet_rl.cli.offline_demo:OfflineDemoOptions",
}


def options_of(command):
    module, name = COMMANDS[command].split(":")
    return getattr(importlib.import_module(module), name)


def test_every_command_is_covered():
    scripts = {f"scripts/{p.name}" for p in (REPO_ROOT / "scripts").glob("*.py")}
    scripts |= {f"visualizers/{p.name}" for p in (REPO_ROOT / "visualizers").glob("visualize_*.py")}
    for room in ("cli", "recipes/mini"):  # the python -m helpers: the demo's, the miniature's
        folder = REPO_ROOT / "sweet_rl" / room
        scripts |= {f"sweet_rl/{room}/{p.name}" for p in folder.glob("*.py")
                    if p.name not in ("main.py", "commands.py", "__main__.py")
                    and 'if __name__ == "__main__":' in p.read_text()}
    assert scripts == set(COMMANDS)


def declaration_problems(cls):
    """Why ``cls`` breaks the one-field-per-flag rule (empty: it does not)."""
    problems, owners = [], {}
    for klass in cls.__mro__:
        if dataclasses.is_dataclass(klass) and issubclass(klass, Options):
            if not klass.__dict__.get("__doc__"):
                problems.append(f"{klass.__name__} has no docstring (its help section title)")
            for name, hint in klass.__dict__.get("__annotations__", {}).items():
                if "ClassVar" in str(hint):
                    continue
                if name in owners:
                    problems.append(f"--{name} declared in {owners[name]} and {klass.__name__}")
                owners[name] = klass.__name__
    names = []
    for spec in flag_table(cls):
        names += [spec.name, *spec.aliases]
        if len(spec.help.split()) < 2:
            problems.append(f"--{spec.name} has no help of its own")
    problems += [f"--{n} is two flags" for n in sorted({n for n in names if names.count(n) > 1})]
    problems += [f"POSITIONAL {p} is no flag" for p in cls.POSITIONAL if p not in names]
    return problems


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_flag_is_one_field_with_its_own_help_and_a_type(command):
    cls = options_of(command)
    assert declaration_problems(cls) == []
    for name, hint in typing.get_type_hints(cls).items():  # every field has a supported type
        if name != "POSITIONAL" and not dataclasses.is_dataclass(hint):
            kind_of(hint)


def test_the_declaration_check_catches_a_flag_written_twice_or_without_help():
    @dataclasses.dataclass(kw_only=True)
    class Group(Options):
        """A group."""

        seed: int = flag("the seed.", 0)

    @dataclasses.dataclass(kw_only=True)
    class Stage(Group):
        """A stage that writes --seed a second time and --k without help."""

        seed: int = flag("the seed again.", 1)
        k: int = flag("", 1)

    assert declaration_problems(Stage) == ["--seed declared in Stage and Group",
                                           "--k has no help of its own"]


def test_command_line_mains_only_wire():
    """A command's ``main`` reads the command line and calls the stage: at most 30 lines."""
    long = {}
    for path in sorted((REPO_ROOT / "sweet_rl" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                length = node.end_lineno - node.lineno + 1
                if length > 30:
                    long[path.name] = length
    assert long == {}


# (command, command line, values) -- the forms the original's commands and our docs use
FORMS = [
    ("scripts/train_dpo.py",
     ["--bf16", "--save_steps", "-1", "--flash_attn", "--gradient_checkpointing"],
     {"bf16": True, "save_steps": -1, "flash_attn": True, "gradient_checkpointing": True}),
    ("scripts/train_dpo.py", ["--bf16", "False", "--eval_steps", "-1", "--use_wandb", "1e5"],
     {"bf16": False, "eval_steps": -1, "use_wandb": "1e5"}),  # a key stays text
    ("scripts/train_dpo.py", ["--local_rank=0", "--report_to", "wandb,tensorboard"],
     {"local_rank": 0, "report_to": ["wandb", "tensorboard"]}),  # the deepspeed launcher's
    ("scripts/train_sft.py", ["--wandb_run_name", "007", "--max_epochs", "1", "--bf16=false"],
     {"wandb_run_name": "007", "max_epochs": 1, "bf16": False}),
    ("scripts/sample_best_of_n.py", ["in.jsonl", "out.jsonl", "--max-new-tokens", "3"],
     {"input_path": "in.jsonl", "output_path": "out.jsonl", "max_new_tokens": 3}),
    ("scripts/rank_best_of_n.py",
     ["--model_id", "m", "--input_path", "i", "--output_path", "o", "--nouse_sum"],
     {"model_id": "m", "use_sum": False}),
    ("scripts/rank_best_of_n.py", ["i", "o", "m", "True", "--save_steps", "4"],
     {"model_id": "m", "no_use_ground_truth": True, "save_steps": 4}),
    ("scripts/evaluate_html.py", ["run.jsonl", "3", "shots"],  # the original's positions
     {"saved_path": "run.jsonl", "k": 3, "temp_path": "shots"}),
    ("scripts/filter_websites.py", ["--saved_path", "a", "--filtered_path", "b", "--train"],
     {"input_path": "a", "output_path": "b", "train": True}),
    ("scripts/merge_shards.py", ["a", "b", "c", "--output_path", "o", "--overwrite"],
     {"shard_paths": ["a", "b", "c"], "output_path": "o", "overwrite": True}),
    ("scripts/simulate_interactions.py", ["--pick_n", "4", "--pick_critic", "c",
                                          "--pick_critic_type", "value",
                                          "--pick_without_ground_truth"],
     {"pick_n": 4, "pick_critic": "c", "pick_critic_type": "value",
      "pick_without_ground_truth": True}),
    ("visualizers/visualize_design_dialogue_histories.py", ["run.jsonl"],
     {"input_path": "run.jsonl", "output_path": None}),
    ("visualizers/visualize_dialogue_histories.py", ["--saved_path", "run.jsonl"],
     {"input_path": "run.jsonl"}),
    ("sweet_rl/recipes/mini/warm_start.py", ["out", "--tie_embeddings", "True", "--families",
                                             "late_fee"],
     {"output_dir": "out", "tie_embeddings": True, "families": ["late_fee"]}),
    ("sweet_rl/recipes/mini/best_of_n.py", ["--agent_model", "a", "--tasks", "t",
                                            "--output_dir", "o", "--ns", "8"], {"ns": [8]}),
]


@pytest.mark.parametrize("command,args,values", FORMS,
                         ids=[f"{c.split('/')[-1]}-{i}" for i, (c, _, _) in enumerate(FORMS)])
def test_the_documented_forms_give_what_they_mean(command, args, values):
    cls = options_of(command)
    if cls.__name__ in ("PreferenceOptions", "SFTOptions"):
        args = ["--pretrain", "M", "--dataset", "D", "--save_path", "S"] + args
    got = parse_command_line(cls, args).flags(secrets=True)
    assert {key: got[key] for key in values} == values


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

# a command line of each script that would write OUT (or rewrite IN) if the stage ran
RUNS = {
    "scripts/download_data.py": ["IN", "OUT"],
    "scripts/evaluate_code.py": ["IN", "--preference_path", "OUT"],
    "scripts/evaluate_html.py": ["IN", "--preference_path", "OUT"],
    "scripts/filter_websites.py": ["IN", "OUT"],
    "scripts/generate_random_pairs_from_ranks.py": ["IN", "OUT"],
    "scripts/merge_shards.py": ["IN", "--output_path", "OUT"],
    "scripts/prepare_frontend_tasks.py": ["OUT", "--data_files", "IN"],
    "scripts/rank_best_of_n.py": ["--model_id", "M", "--input_path", "IN", "--output_path", "OUT"],
    "scripts/sample_best_of_n.py": ["IN", "OUT", "--agent_model", "M"],
    "scripts/simulate_interactions.py": ["--output_path", "OUT", "--max_new_tokens", "4"],
    "scripts/train_dpo.py": ["--pretrain", "M", "--dataset", "IN", "--save_path", "OUT"],
    "scripts/train_sft.py": ["--pretrain", "M", "--dataset", "IN", "--save_path", "OUT"],
    "visualizers/visualize_dialogue_histories.py": ["IN", "OUT"],
    "visualizers/visualize_design_dialogue_histories.py": ["IN", "OUT"],
}


@pytest.mark.parametrize("script", sorted(RUNS))
def test_misspelled_flag_exits_2_at_once_and_touches_nothing(script, tmp_path):
    cls = options_of(script)
    names = [spec.name for spec in flag_table(cls)]
    real = max(names, key=len)
    typo = _typo(real)
    assert typo != real and typo not in names
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"task": {"problem_description": "p", "ground_truth": "g"},
                               "dialogue_history": [], "answer": ""}) + "\n")
    before = src.read_bytes()
    out = tmp_path / "out"
    args = [{"IN": str(src), "OUT": str(out), "M": str(tmp_path / "model")}.get(a, a)
            for a in RUNS[script]]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", PROBE, str(REPO_ROOT / script), *args,
                             f"--{typo}", "1"], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    first = (cls.POSITIONAL or (names[0],))[0]
    assert lines[0].startswith(f"error: unknown flag --{typo} (did you mean --{real}?); "
                               f"valid flags: --{first}, ")
    assert elapsed < 10  # about 0.2 s here: the stage never starts
    assert not out.exists() and not os.path.exists(str(out) + ".config.json")
    assert src.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["in.jsonl"]


def test_a_bad_value_a_missing_argument_and_a_bad_config_exit_2_before_any_work(tmp_path):
    config = tmp_path / "typo.json"
    config.write_text(json.dumps({"learning_rat": 1.0, "_comment": "ignored"}))
    cases = [
        (["scripts/evaluate_code.py", "run.jsonl", "--k", "two"],
         "error: --k must be an integer, got 'two'"),
        (["scripts/sample_best_of_n.py", "in.jsonl"],
         "error: missing required argument output_path (give it as --output_path VALUE or by "
         "position)"),
        (["scripts/train_dpo.py", "--config", str(config)],
         "error: " + str(config) + ": unknown key 'learning_rat' (did you mean learning_rate?)"),
        (["scripts/rank_best_of_n.py", "in.jsonl", "out.jsonl", "--critic_type", "best"],
         "error: --critic_type must be one of logprob, regression, value, vlm_regression, "
         "judge, random, got 'best'"),
    ]
    for command, message in cases:
        result = subprocess.run([sys.executable, "-c", PROBE, str(REPO_ROOT / command[0]),
                                 *command[1:]], capture_output=True, text=True, timeout=60,
                                cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.strip() == message, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["typo.json"]
