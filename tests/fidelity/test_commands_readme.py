"""The commands of the original README (facebookresearch/sweet_rl), paths replaced, run here.

``deepspeed --module openrlhf.cli.train_dpo`` becomes ``scripts/train_dpo.py`` (same flags).
Two typos of that README: ``---train`` parses (extra leading hyphens are dropped, as fire
dropped them); the trailing ``\\`` that glues ``python scripts/evaluate_html.py ...`` onto the
frontend simulate command is set aside (two commands here).
"""

import json
import os
import subprocess
import sys
import time

import pytest

from sweet_rl.flags import parse_command_line
from tests.cli.test_flags import options_of
from tests.conftest import REPO_ROOT

TEMPLATE = "<|start_header_id|>assistant<|end_header_id|>"
CRITIC = ["--save_path", "REWARD_PATH", "--save_steps", "-1", "--logging_steps", "1",
          "--eval_steps", "-1", "--train_batch_size", "8", "--micro_train_batch_size", "1",
          "--pretrain", "MODEL", "--bf16", "--max_epochs", "4", "--max_len", "8192",
          "--zero_stage", "3", "--learning_rate", "2e-7", "--beta", "0.1", "--dataset", "GT_PAIRS",
          "--chosen_key", "chosen", "--rejected_key", "rejected", "--flash_attn",
          "--gradient_checkpointing", "--use_wandb", "WANDB_KEY", "--response_template", TEMPLATE,
          "--wandb_run_name", "sweet_code_rm", "--mean_log_prob"]
AGENT = ["--save_path", "SAVE_PATH", "--save_steps", "-1", "--logging_steps", "1",
         "--eval_steps", "-1", "--train_batch_size", "8", "--micro_train_batch_size", "1",
         "--pretrain", "MODEL", "--bf16", "--max_epochs", "1", "--max_len", "16384",
         "--zero_stage", "3", "--learning_rate", "2e-7", "--beta", "0.1", "--dataset", "PAIRS",
         "--chosen_key", "chosen", "--rejected_key", "rejected", "--flash_attn",
         "--gradient_checkpointing", "--nll_loss_coef", "0.01", "--use_wandb", "WANDB_KEY",
         "--wandb_run_name", "sweet_code_8b"]

README_COMMANDS = [
    (
        "simulate",
        [
            "--agent_model",
            "MODEL",
            "--hostname",
            "localhost",
            "--task_type",
            "code",
            "--num_tasks",
            "1000",
            "--input_path",
            "TEST",
            "--output_path",
            "OUT",
            "--env_model",
            "SIM",
        ],
    ),
    ("evaluate_code", ["OUT"]),
    ("visualize_dialogue_histories", ["OUT"]),
    (
        "simulate",
        [
            "--agent_model",
            "MODEL",
            "--task_type",
            "html",
            "--num_tasks",
            "100",
            "--hostname",
            "localhost",
            "--output_path",
            "OUT",
            "--input_path",
            "TASKS",
            "--env_model",
            "SIM",
        ],
    ),
    ("evaluate_html", ["OUT"]),
    ("visualize_design_dialogue_histories", ["OUT"]),
    ("evaluate_code", ["DATA", "--k", "3", "--ground_truth_preference_path", "GT_PAIRS"]),
    ("train_dpo", CRITIC),
    ("sample_best_of_n", ["DATA", "SAMPLED", "--data_fraction", "0.1"]),
    (
        "rank_best_of_n",
        ["--model_id", "REWARD_PATH", "--input_path", "SAMPLED", "--output_path", "RANKED"],
    ),
    ("generate_random_pairs", ["RANKED", "PAIRS", "--no_prompt", "--num_pairs", "4"]),
    ("train_dpo", AGENT),
    (
        "simulate",
        [
            "--agent_model",
            "SAVE_PATH",
            "--hostname",
            "host",
            "--input_path",
            "TEST",
            "--task_type",
            "code",
            "--num_tasks",
            "1000",
            "--output_path",
            "EVAL",
        ],
    ),
    ("evaluate_code", ["EVAL"]),
]
# The frontend data command; it needs simulate's --train (added there by its owner).
TRAIN_DATA = ["--agent_model", "MODEL", "--task_type", "html", "--num_tasks", "1000",
              "--best_of_n", "6", "---train", "--hostname", "localhost", "--output_path", "OUT",
              "--input_path", "TRAIN", "--env_model", "SIM", "--to_continue"]


def _options(name):
    script = {"simulate": "scripts/simulate_interactions.py",
              "generate_random_pairs": "scripts/generate_random_pairs_from_ranks.py"}.get(
        name, f"visualizers/{name}.py" if name.startswith("visualize") else f"scripts/{name}.py")
    return options_of(script)


@pytest.mark.parametrize("name,args", README_COMMANDS,
                         ids=[f"{i}-{n}" for i, (n, _) in enumerate(README_COMMANDS)])
def test_readme_command_parses(name, args):
    opts = parse_command_line(_options(name), args).flags(secrets=True)
    flags = [a.lstrip("-") for a in args if a.startswith("--")]
    assert all(flag in opts for flag in flags)  # every flag went to its own field
    if name == "train_dpo":
        assert opts["bf16"] is True and opts["save_steps"] == -1 and opts["max_len"] in (8192,
                                                                                          16384)
        assert opts["use_wandb"] == "WANDB_KEY" and opts["learning_rate"] == 2e-7
    if name == "sample_best_of_n":
        assert (opts["input_path"], opts["output_path"], opts["data_fraction"]) == (
            "DATA", "SAMPLED", 0.1)
    if name == "generate_random_pairs":
        assert (opts["input_path"], opts["output_path"], opts["no_prompt"], opts["num_pairs"]) \
            == ("RANKED", "PAIRS", True, 4)
    if name == "evaluate_code" and len(args) > 1:
        assert (opts["saved_path"], opts["k"], opts["ground_truth_preference_path"]) == (
            "DATA", 3, "GT_PAIRS")


def test_frontend_data_command_parses_with_train():
    opts = parse_command_line(_options("simulate"), TRAIN_DATA)
    assert opts.train is True and opts.to_continue is True and opts.best_of_n == 6
    assert (opts.task_type, opts.hostname, opts.env_model) == ("html", "localhost", "SIM")


def test_stray_blank_argument_of_the_readme_evaluation_command_is_dropped():
    # The original README's evaluation command ends a line with "\\ \\", which passes one
    # argument " "; fire would give it to the first free positional parameter.
    args = ["--agent_model", "SAVE_PATH", "--hostname", "host", "--input_path", "TEST", " ",
            "--task_type", "code", "--num_tasks", "1000", "--output_path", "EVAL"]
    opts = parse_command_line(_options("simulate"), args)
    assert opts == parse_command_line(_options("simulate"), [a for a in args if a != " "])
    assert opts.user_prompt_path == "auto"  # the blank filled no positional parameter


def _run(script, *args, env=None, timeout=600):
    return subprocess.run([sys.executable, str(REPO_ROOT / script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
                          env=dict(os.environ, **(env or {})))


def _pairs(path, count=8):
    """Critic pairs like evaluate's --ground_truth_preference_path (8: one step of batch 8)."""
    from tests.training.helpers import critic_pairs

    critic_pairs(path, n=6)
    with open(path, encoding="utf-8") as handle:
        rows = handle.readlines()
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines((rows * 2)[:count])
    return str(path)


def _fill(args, values):
    return [values.get(a, a) for a in args]


@pytest.mark.slow  # a stage's script end to end in a subprocess
@pytest.mark.slow
def test_critic_command_trains_with_the_run_name(tiny_model_dir, tmp_path):
    """The README's critic command on the tiny model, without --use_wandb (wandb logging is
    checked below): --eval_steps gets its notice, --zero_stage 3 without the deepspeed launcher
    and --flash_attn without the package fall back with a warning, --wandb_run_name names the
    run (TrainingArguments.run_name), 8 pairs / batch 8 x 4 epochs = 4 steps."""
    torch = pytest.importorskip("torch")
    save = tmp_path / "temp_rm"
    args = _fill(CRITIC, {"REWARD_PATH": str(save), "MODEL": tiny_model_dir,
                          "GT_PAIRS": _pairs(tmp_path / "gt_pairs.jsonl")})
    cut = args.index("--use_wandb")
    result = _run("scripts/train_dpo.py", *(args[:cut] + args[cut + 2:]))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("--eval_steps ignored: the held-out share of --dataset") == 1
    assert "train_dpo: stage=train_dpo examples=8 steps=4 " in result.stdout
    sidecar = json.loads((save / "training.config.json").read_text())["stages"]["train_dpo"]
    assert sidecar["wandb_run_name"] == "sweet_code_rm" and sidecar["use_wandb"] is None
    assert sidecar["mean_log_prob"] is True and sidecar["eval_steps"] == -1
    arguments = torch.load(save / "training_args.bin", weights_only=False)
    assert arguments.run_name == "sweet_code_rm" and arguments.report_to in ([], "none", ["none"])


def test_use_wandb_without_the_package_stops_before_any_work(tmp_path):
    """--use_wandb KEY where wandb is not installed: one line naming the package, exit 2, at
    once, before the model or data are read (both are missing here on purpose), nothing
    written and the key never printed."""
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed: see the offline test")
    save = tmp_path / "temp_dpo"
    args = _fill(AGENT, {"SAVE_PATH": str(save), "MODEL": str(tmp_path / "no_model"),
                         "PAIRS": str(tmp_path / "no_pairs.jsonl"), "WANDB_KEY": "k3y-s3cr3t"})
    started = time.monotonic()
    result = _run("scripts/train_dpo.py", *args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --use_wandb needs the wandb package, which is not installed (pip install wandb), "
        "or leave --use_wandb out")
    assert time.monotonic() - started < 20 and not save.exists()
    assert "k3y-s3cr3t" not in result.stdout + result.stderr
    result = _run("scripts/train_sft.py", "--pretrain", "M", "--dataset", "D", "--save_path", save,
                  "--use_wandb", "k3y-s3cr3t")
    assert (
        result.returncode == 2 and "needs the wandb package" in result.stderr and not save.exists()
    )


def test_use_wandb_logs_offline_and_never_writes_the_key(tiny_model_dir, tmp_path):
    """With wandb installed: WANDB_MODE=offline (no network), the run is logged under its name
    and the key appears in no file of the output."""
    pytest.importorskip("wandb")
    save = tmp_path / "temp_rm"
    args = _fill(CRITIC, {"REWARD_PATH": str(save), "MODEL": tiny_model_dir,
                          "GT_PAIRS": _pairs(tmp_path / "gt_pairs.jsonl"), "WANDB_KEY": "0" * 40})
    args[args.index("--max_epochs") + 1] = "1"
    result = _run("scripts/train_dpo.py", *args,
                  env={"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_API_KEY": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / "wandb").glob("offline-run-*"))
    for root, _, files in os.walk(save):
        for name in files:
            assert b"0" * 40 not in open(os.path.join(root, name), "rb").read(), name


def test_viewers_take_one_argument(tmp_path):
    """``visualize_*_dialogue_histories.py FILE``: the page is written beside FILE."""
    task = {"problem_description": "p", "ground_truth": "<html><body>r</body></html>"}
    rows = [
        {
            "task": task,
            "dialogue_history": [{"role": "user", "content": "p"}],
            "answer": "No answer",
        }
    ]
    src = tmp_path / "temp_test_html.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = tmp_path / "temp_test_code.jsonl"  # the backend viewer takes backend rows only
    code.write_text(json.dumps(dict(rows[0], task=dict(task, ground_truth="def f(): pass",
                                                       test_cases={"t": "f()"}))) + "\n")
    for viewer, given in (("visualizers/visualize_design_dialogue_histories.py", src),
                          ("visualizers/visualize_dialogue_histories.py", code)):
        out = given.with_suffix(".html")
        result = _run(viewer, given)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith(f"-> {out}") and out.exists()
        out.unlink()
    result = _run("visualizers/visualize_design_dialogue_histories.py", "--saved_path", src,
                  "--temp_path", tmp_path / "scratch", "--train")
    assert result.returncode == 0, result.stderr
    assert "--temp_path not used" in result.stderr and "--train has no effect" in result.stderr


@pytest.mark.slow  # a stage's script end to end in a subprocess
@pytest.mark.slow
def test_evaluate_html_readme_command_on_original_rows(tmp_path):
    """``evaluate_html.py FILE`` on rows shaped as the original wrote them (answer: the final
    screenshot's path, or "No answer"). ``--clip_pretrained none --device cpu``: no weights
    can be downloaded here. The reference screenshots sit in the run's screenshot folder under
    their content names, so nothing is rendered. Printed last: the original's lines."""
    pytest.importorskip("open_clip")
    from PIL import Image

    from sweet_rl.rendering.screenshots import default_screenshot_dir, screenshot_path

    src = tmp_path / "temp_test_html.jsonl"
    tasks = [{"problem_description": f"site {i}", "ground_truth": f"<html><body>{i}</body></html>"}
             for i in range(2)]
    for i, task in enumerate(tasks):
        path = screenshot_path(default_screenshot_dir(str(src)), task["ground_truth"], "reference")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.new("RGB", (300, 200), ("white", "teal")[i]).save(path)
        if i == 0:  # rollout 0 of task 0 showed exactly the reference page
            Image.open(path).save(tmp_path / "env_0.png")
    turn = {"role": "assistant", "content": "Here: <html><body>x</body></html>",
            "input": "IN", "output": "OUT"}
    rows = [{"task": tasks[0], "dialogue_history": [turn], "answer": "env_0.png"},
            {"task": tasks[1], "dialogue_history": [turn], "answer": "No answer"},
            {"task": tasks[0], "dialogue_history": [turn], "answer": "No answer"},
            {"task": tasks[1], "dialogue_history": [turn], "answer": "No answer"}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = tmp_path / "gt.jsonl"
    result = _run("scripts/evaluate_html.py", src, "--k", "2", "--ground_truth_preference_path",
                  pairs, "--clip_pretrained", "none", "--device", "cpu")
    assert result.returncode == 0, result.stderr[-3000:]
    rewards = [json.loads(line)["reward"] for line in src.read_text().splitlines()]
    assert rewards[0] == 1.0 and rewards[1] == rewards[3]  # black vs the same reference
    # Best-of-2: task 0 = max(1.0, black) = 1.0; task 1 = black vs teal (both rollouts)
    lines = result.stdout.strip().splitlines()
    assert lines[-4].startswith(
        "evaluate_html: 4 trajectories (2 tasks x 2), best-of-2 CLIP similarity"
    )
    assert float(lines[-3]) == pytest.approx(sum(rewards) / 4)
    assert lines[-2] == f"Best-of-2 Average reward: {(1.0 + rewards[1]) / 2}"
    # pairs: task 0's rollouts differ by >= 0.1 (1.0 vs black), task 1's are equal
    assert lines[-1] == "Number of preference pairs: 1" and len(pairs.read_text().splitlines()) == 1


def test_filter_websites_original_names_without_a_browser(tmp_path):
    """--saved_path / --filtered_path are the input and output: a missing input is named (the
    alias reached the stage) before any browser starts; two different inputs are refused."""
    out = tmp_path / "kept.jsonl"
    result = _run("scripts/filter_websites.py", "--saved_path", tmp_path / "none.jsonl",
                  "--filtered_path", out, "--temp_path", tmp_path / "scratch", "--train")
    assert result.returncode == 2 and str(tmp_path / "none.jsonl") in result.stderr
    assert "--temp_path not used" in result.stderr and not out.exists()
    result = _run(
        "scripts/filter_websites.py",
        tmp_path / "a.jsonl",
        "--saved_path",
        tmp_path / "b.jsonl",
        "--filtered_path",
        out,
    )
    assert result.returncode == 2 and "disagree" in result.stderr
    result = _run("scripts/filter_websites.py", "--saved_path", tmp_path / "a.jsonl")
    assert result.returncode == 2 and ("missing required argument output_path (give it as "
                                       "--output_path (or --filtered_path) VALUE") in result.stderr


@pytest.mark.slow
def test_filter_websites_original_names(render_assets, tmp_path):
    """The original's ``filter_websites.py --saved_path IN --filtered_path OUT``, for real."""
    tasks = [
        {"problem_description": "ok", "ground_truth": "<html><body><h1>Hello</h1></body></html>"},
        {"problem_description": "blank", "ground_truth": "<html><body></body></html>"},
    ]
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "kept.jsonl"
    result = _run("scripts/filter_websites.py", "--saved_path", src, "--filtered_path", out,
                  "--assets_dir", render_assets, "--pool_size", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert [json.loads(line)["problem_description"] for line in out.read_text().splitlines()] == [
        "ok"
    ]


# The original scripts' parameters, in their order (arguments without a flag fill them).
ORIGINAL_ORDER = {
    "simulate": ["hostname", "input_path", "output_path", "user_prompt_path", "agent_prompt_path",
                 "agent_model", "env_model", "batch_size", "num_tasks", "max_steps", "best_of_n",
                 "train", "task_type", "port", "temperature", "temp_path", "to_continue"],
    "evaluate_code": ["saved_path", "k", "preference_path", "ground_truth_preference_path"],
    "evaluate_html": ["saved_path", "k", "temp_path", "preference_path",
                      "ground_truth_preference_path"],
    "sample_best_of_n": ["input_path", "output_path", "agent_model", "temperature", "best_of_n",
                         "data_fraction"],
    "rank_best_of_n": ["input_path", "output_path", "model_id", "no_use_ground_truth", "use_sum",
                       "save_steps"],
    "generate_random_pairs": ["input_path", "output_path", "get_sft", "no_prompt", "num_pairs"],
}


@pytest.mark.parametrize("name", sorted(ORIGINAL_ORDER))
def test_positional_arguments_fill_the_originals_parameters(name):
    assert list(_options(name).POSITIONAL) == ORIGINAL_ORDER[name]


def test_rank_needs_a_critic_and_never_falls_back_to_the_tiny_model(tmp_path):
    from sweet_rl.stages.rank import RankOptions

    with pytest.raises(ValueError, match="--model_id is required"):
        RankOptions(input_path=str(tmp_path / "in.jsonl"), output_path=str(tmp_path / "out.jsonl"))
    assert not (tmp_path / "out.jsonl").exists()
