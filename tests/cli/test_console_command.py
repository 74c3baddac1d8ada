"""`sweet-rl <stage>`: the console command dispatches to the same stages as scripts/*.py."""

import re
import subprocess
import sys

import pytest

from sweet_rl.cli.main import SHORT_NAMES, STAGES
from tests.conftest import REPO_ROOT


def run(*args):
    probe = ("import sys; from sweet_rl.cli.main import main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit as stop:\n"
             "    code = stop.code\nelse:\n    code = 0\n"
             "assert 'torch' not in sys.modules, 'torch imported'\nsys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin", "PAGER": "cat"})


def test_every_stage_is_a_script_and_every_script_a_stage():
    scripts = {path.stem: path.read_text() for path in (REPO_ROOT / "scripts").glob("*.py")}
    assert set(scripts) == set(STAGES)
    for stage, module in STAGES.items():
        assert re.search(rf"from sweet_rl\.cli\.{module} import main\b", scripts[stage]), stage
    assert set(SHORT_NAMES.values()) <= set(STAGES)


def test_help_lists_the_stages():
    done = run("--help")
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^  (\w+)$", done.stdout, re.M)
    assert listed == list(STAGES)


@pytest.mark.parametrize("stage", ["evaluate_code", "simulate", "generate_random_pairs", "merge"])
def test_a_stages_help_is_the_stages_own(stage):
    done = run(stage, "--help")
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr
    assert "NAME" in shown and ("FLAGS" in shown or "POSITIONAL ARGUMENTS" in shown)
    assert SHORT_NAMES.get(stage, stage) in shown


def test_merge_is_a_stage(tmp_path):
    assert STAGES["merge_shards"] == "merge" and SHORT_NAMES["merge"] == "merge_shards"
    done = run("merge", str(tmp_path / "missing.jsonl"), "--output_path", str(tmp_path / "o"))
    assert done.returncode == 2 and done.stderr.startswith("error: ")
    assert "missing.jsonl: file not found" in done.stderr


def test_an_unknown_stage_or_a_bad_flag_exits_2_with_one_line():
    done = run("simulat")
    assert done.returncode == 2 and "no stage named 'simulat'" in done.stderr
    done = run("evaluate_code", "--no_such_flag", "1")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "no_such_flag" in done.stderr
