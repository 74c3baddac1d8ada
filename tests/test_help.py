"""``--help`` a newcomer can read (issue 14): every flag of every stage with its own complete
description, a readable type and its real default; the docstring parser on its own; both forms
of the best-of-N stages' paths; the shell recipes' ``--help``."""

import functools
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import time

import pytest
from fire import core, decorators

from sweet_rl.cli.common import CommandLineError, check_command_line
from sweet_rl.cli.helptext import (add_args, parse_docstring, readable_type, render_help,
                                   show_default)
from sweet_rl.cli.main import STAGES
from tests.conftest import REPO_ROOT

ENV = {"PAGER": "cat", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


# -- the docstring parser and the type names (pure) ------------------------------------------

DOC = '''Do the thing to ``path``.

    Second paragraph, not the summary.

    Args (unset ones come from --config):
        path: the input file; it is read
            once, then closed.
        a, b: shared by two flags.
        left / right: two more, split by a slash.
        typed (int): Google's typed form.
        path: a second mention adds to the first.

    Printed at the end: a line that is no flag's description.
        not_a_flag: indented under prose after the section.
'''


def test_parse_docstring_entries_continuations_and_shared_entries():
    parsed = parse_docstring(DOC)
    assert parsed.summary == "Do the thing to path."
    assert parsed.note == "unset ones come from --config"
    assert parsed.args == {
        "path": "the input file; it is read once, then closed. a second mention adds to the first.",
        "a": "shared by two flags.", "b": "shared by two flags.",
        "left": "two more, split by a slash.", "right": "two more, split by a slash.",
        "typed": "Google's typed form.",
    }


def test_parse_docstring_without_an_args_section_or_text():
    assert parse_docstring("One line.").args == {}
    assert parse_docstring("One line.").summary == "One line."
    assert parse_docstring(None).summary == "" and parse_docstring("").args == {}
    # a line at the entry indent that is not ``name:`` continues the open entry
    assert parse_docstring("S.\n\nArgs:\n    x: one.\n    More about x.\n").args == {
        "x": "one. More about x."}


def test_add_args_puts_shared_entries_inside_the_args_section():
    added = add_args(DOC, """
        extra: written once
            for two stages.
    """)
    parsed = parse_docstring(added)
    assert parsed.args["extra"] == "written once for two stages."
    assert "not_a_flag" not in parsed.args  # still after the section, not in it
    assert {k: v for k, v in parsed.args.items() if k != "extra"} == parse_docstring(DOC).args
    assert add_args(None, "x: y.") is None  # python -OO
    with pytest.raises(ValueError):
        add_args("No section.", "x: y.")


@pytest.mark.parametrize("annotation, shown", [
    ("str", "str"), ("Optional[str]", "str or None"), ("Optional[int]", "int or None"),
    ("Union[None, str, List[str]]", "str, list of str or None"), ("List[str]", "list of str"),
    ("str | None", "str or None"), ("'Optional[str]'", "str or None"), (int, "int"),
    (type(None), "None"), ("Dict[str, Any]", "dict"), (inspect.Parameter.empty, ""),
])
def test_readable_type(annotation, shown):
    assert readable_type(annotation) == shown


def test_readable_type_of_typing_objects():
    from typing import List, Optional, Union

    assert readable_type(Optional[float]) == "float or None"
    assert readable_type(Union[None, str, List[str]]) == "str, list of str or None"


def test_show_default():
    assert show_default("auto") == '"auto"' and show_default("") == '""'
    assert [show_default(v) for v in (None, False, 2e-7, -1)] == ["None", "False", "2e-07", "-1"]


def test_render_help_of_a_small_function():
    def stage(source: str, *, k: int = 2, fast: bool = False):
        """Copy things.

        Args:
            source: where from.
            k: how many.
            fast: go quickly.
        """

    text = render_help(stage, "copy.py", defaults={"k": 5})
    assert text.startswith("usage: copy.py SOURCE [--NAME VALUE ...]\n\nCopy things.\n")
    assert "  SOURCE, --source, -s  (str; required)\n      where from." in text
    assert "  --k  (int; default: 5)\n      how many." in text
    assert "  --fast, -f  (bool; default: False)\n      go quickly." in text


# -- every stage script -------------------------------------------------------------------

def _main(stage):
    return importlib.import_module(f"sweet_rl.cli.{STAGES[stage]}").main


def _real_defaults(main):
    hook = getattr(main, "help_defaults", None)
    return dict(hook() if hook else {})


@functools.lru_cache(maxsize=None)
def _help(stage, flag="--help"):
    done = subprocess.run([sys.executable, f"scripts/{stage}.py", flag], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def _blocks(text):
    """{header line: description} of every parameter block of a help text."""
    blocks, header = {}, None
    for line in text.splitlines():
        if re.match(r"  (--|[A-Z])", line):
            header = line.strip()
            blocks[header] = ""
        elif header and line.startswith("      "):
            blocks[header] += " " + line.strip()
    return {h: " ".join(d.split()) for h, d in blocks.items()}


def _block_of(blocks, name, varargs=False):
    wanted = f"{name.upper()} ..." if varargs else f"--{name}"
    found = [(h, d) for h, d in blocks.items() if wanted in re.split(r", |  ", h)]
    assert len(found) == 1, (name, list(blocks))
    return found[0]


def _first_sentence(text):
    return re.split(r"(?<=[.;)])\s", text, maxsplit=1)[0]


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_flag_has_its_own_full_description_type_and_real_default(stage):
    main = _main(stage)
    text = _help(stage)
    for bad in ("Showing help", "Optional[", "Union[", "NAME\n", "(not described)"):
        assert bad not in text, bad
    assert text.startswith(f"usage: {stage}.py ")
    described = parse_docstring(inspect.getdoc(main)).args
    real = _real_defaults(main)
    params = list(inspect.signature(main).parameters.values())
    blocks = _blocks(text)
    assert len(blocks) == len(params)
    for index, param in enumerate(params):
        own = " ".join(described.get(param.name, "").replace("``", "").split())
        assert own, f"{param.name} has no description in the docstring"
        others = [p.name for p in params if p.name != param.name]
        glued = [o for o in others if re.search(rf"(^|[.;] ){o}:", own)]
        assert not glued, f"{param.name}'s description holds {glued}'s"
        header, block = _block_of(blocks, param.name, param.kind == param.VAR_POSITIONAL)
        assert block == own  # the whole entry, never cut
        if index + 1 < len(params):
            following = " ".join(described[params[index + 1].name].replace("``", "").split())
            if _first_sentence(following) not in own:
                assert _first_sentence(following) not in block
        default = real.get(param.name, param.default)
        if param.kind == param.VAR_POSITIONAL:
            assert "one or more" in header
        elif default is param.empty:
            assert header.endswith("required)")
        else:
            shown = json.dumps(default) if isinstance(default, str) else repr(default)
            assert header.endswith(f"default: {shown})"), header
            if default is not None:
                assert "default: None" not in header


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_dash_h_is_help_too(stage):
    assert _help(stage, "-h") == _help(stage)


def test_training_defaults_are_the_options_defaults_not_none():
    from sweet_rl.training.options import PreferenceOptions, SFTOptions

    dpo, sft = _blocks(_help("train_dpo")), _blocks(_help("train_sft"))
    assert _block_of(dpo, "learning_rate")[0] == "--learning_rate  (float; default: 2e-07)"
    assert _block_of(dpo, "beta")[0].endswith(f"default: {PreferenceOptions.beta})")
    assert _block_of(dpo, "bf16")[0] == "--bf16  (bool; default: False)"
    template = json.dumps(SFTOptions.response_template)
    assert _block_of(sft, "response_template")[0].endswith(f"default: {template})")
    assert _block_of(dpo, "response_template")[0].endswith("default: None)")
    assert "(unset ones come from --config, then these defaults)" in _help("train_sft")


@pytest.mark.parametrize("args", [["in.jsonl", "--k", "2", "--help"], ["in.jsonl", "--", "--help"],
                                  ["--no_such_flag", "1", "-h"], ["-h", "in.jsonl"]])
def test_help_anywhere_runs_nothing(args, tmp_path):
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/evaluate_code.py"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == _help("evaluate_code") and os.listdir(tmp_path) == []


def test_the_console_command_shows_the_same_help():
    done = subprocess.run([sys.executable, "-m", "sweet_rl.cli.main", "simulate", "--help"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0
    assert done.stdout.replace("simulate_interactions ", "simulate_interactions.py ", 1) == \
        _help("simulate_interactions")


# -- both forms of the best-of-N stages' paths ---------------------------------------------

def _fire_values(main, args):
    (positional, kwargs), _, remaining, _ = core._MakeParseFn(main, decorators.GetMetadata(main))(
        list(args))
    assert remaining == []
    return dict(zip(core.inspectutils.GetFullArgSpec(main).args, positional), **kwargs)


@pytest.mark.parametrize("stage", ["sample_best_of_n", "rank_best_of_n"])
def test_paths_by_position_or_by_flag(stage):
    main = _main(stage)
    assert list(inspect.signature(main).parameters)[:2] == ["input_path", "output_path"]
    forms = [["IN", "OUT", "--model_id", "M"],
             ["--input_path", "IN", "--output_path", "OUT", "--model_id", "M"],
             ["--output_path", "OUT", "IN", "--model_id", "M"],
             ["--input_path=IN", "OUT", "--model_id", "M"]]
    flag = "--agent_model" if stage == "sample_best_of_n" else "--model_id"
    for form in forms:
        form = [flag if a == "--model_id" else a for a in form]
        assert check_command_line(main, form) == form
        values = _fire_values(main, form)
        assert (values["input_path"], values["output_path"]) == ("IN", "OUT"), form
    with pytest.raises(CommandLineError, match="missing required argument output_path"):
        check_command_line(main, ["IN", flag, "M"])
    assert "usage: %s.py INPUT_PATH OUTPUT_PATH " % stage in _help(stage)


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
           "run_mini_quick", "run_mini_reproduction", "build_mini_agent", "vllm_env"]


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


# -- the helper commands the miniature and the demo run with python -m -------------------

HELPERS = sorted(set(name[:-3] for name in os.listdir(REPO_ROOT / "sweet_rl" / "cli")
                     if name.endswith(".py") and name[:-3] not in ("__init__", "common",
                                                                     "helptext", "main",
                                                                     "evaluate_common"))
                 - set(STAGES.values()))


def test_the_helper_list_is_the_miniature_and_demo_commands():
    assert {"mini_best_of_n", "mini_copy_check", "mini_critic_check", "mini_table",
            "mini_warm_start", "offline_demo"} <= set(HELPERS)


@pytest.mark.parametrize("module", HELPERS)
def test_every_helper_command_describes_each_flag(module):
    done = subprocess.run([sys.executable, "-m", f"sweet_rl.cli.{module}", "--help"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("usage: ")
    main = importlib.import_module(f"sweet_rl.cli.{module}").main
    described = parse_docstring(inspect.getdoc(main)).args
    for name in inspect.signature(main).parameters:
        assert described.get(name), f"{module}: --{name} has no description"
    assert "(not described)" not in done.stdout
