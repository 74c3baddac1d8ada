"""Recipe: the warm-started tiny agent of the miniature ColBench, on the CPU, with the
project's own stages (``sweet-rl mini build_agent``; docs/mini_warm_start.md).

1. ``warm_start``: a fresh tiny Llama (local tokenizer), train and held-out test tasks, one
   scripted dialogue per train task in a mix of styles (askers, guessers, wasters; the
   followup family's own styles with ``family`` followup);
2. ``evaluate_code``: the real grader writes each dialogue's reward;
3. ``train_sft`` with ``--min_reward 0``: SFT on *every* dialogue, not only the successful
   ones, so the agent clones the mix and succeeds only when it happens to play the asker
   (with ``drill_epochs`` > 0, first on the recall drills alone: a curriculum);
4. (``measure``) ``simulate_interactions`` with the scripted human on the held-out tasks at
   temperature 1.0, then ``evaluate_code``: the zero-shot success.

A model this small learns from scratch: a learning rate far above the paper's 2e-7, small
batches for more updates, several epochs, no held-out share. The copy (writing back what was
told) is learnt in a sudden jump whose timing depends on the seed and on the machine's float
kernels, so each training is checked on told train dialogues (``copy_check``) and, when the
agent does not copy, trained again from the same base model and data in another order
(training seed ``seed + 1000 * try``): up to ``tries`` trainings from try ``first_try``,
``tries_at_once`` (default ``jobs``) at a time, and the first try in order that copies is kept,
so the agent depends on neither.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from typing import List

from sweet_rl.recipes.mini.schedule import Scheduler, StepFailed
from sweet_rl.recipes.mini.settings import BuildSettings


def _sft(run: Scheduler, s: BuildSettings, base: str, dataset: str, epochs: int, save: str,
         seed: int) -> None:
    run.stage("train_sft", "--pretrain", base, "--dataset", dataset, "--max_epochs",
              str(epochs), "--save_path", save, "--seed", str(seed), "--min_reward", "0",
              "--learning_rate", str(s.lr), "--train_batch_size", str(s.batch),
              "--micro_train_batch_size", str(s.micro), "--max_len", "1024",
              "--lr_warmup_ratio", "0.05", "--eval_holdout", "0", "--zero_stage", "0",
              "--bf16", "False", "--gradient_checkpointing", "False", "--flash_attn", "False",
              "--report_to", "none")


def _train_try(run: Scheduler, s: BuildSettings, attempt: int) -> None:
    """One SFT into OUT/try<attempt>, then its copy check."""
    seed, base = s.seed + 1000 * attempt, os.path.join(s.out, "base")
    here = os.path.join(s.out, f"try{attempt}")
    if s.drill_epochs:  # the drills alone first: where the copy is learnt
        _sft(run, s, base, os.path.join(s.out, "drills.jsonl"), s.drill_epochs,
             here + ".drills", seed)
        base = here + ".drills"
    _sft(run, s, base, os.path.join(s.out, "sft.jsonl"), s.epochs, here, seed)
    if s.copy_min:
        run.mini("copy_check", here, os.path.join(s.out, "train_tasks.jsonl"),
                 "--agent_prompt_path", os.path.join(s.out, "agent_prompt.txt"),
                 "--output_path", here + ".copy_check.json", *run.device_flag)


def _copies(s: BuildSettings, attempt: int) -> bool:
    if not s.copy_min:
        return True
    with open(os.path.join(s.out, f"try{attempt}.copy_check.json")) as handle:
        return json.load(handle)["share"] >= s.copy_min


def _remove_tries(out: str) -> None:
    for path in glob.glob(os.path.join(out, "try[0-9]*")):
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def build_agent(s: BuildSettings, run: Scheduler) -> str:
    """The warm agent in ``OUT/agent`` (and its measurement); returns its folder."""
    out = s.out
    os.makedirs(out, exist_ok=True)
    run.mini("warm_start", out, "--num_train_tasks", str(s.train_tasks), "--num_test_tasks",
             str(s.test_tasks), "--mix", s.shares(), "--seed", str(s.seed), "--hidden_size",
             str(s.hidden), "--num_layers", str(s.layers), "--tie_embeddings", str(s.tie),
             "--num_drills", str(s.drills), "--agent_prompt_path", s.agent_prompt,
             "--family", s.family, "--num_valid_tasks", str(s.valid_tasks),
             *(["--families", ",".join(s.families)] if s.families else []))
    run.stage("evaluate_code", os.path.join(out, "warm_start.jsonl"), "--k", "1")
    # the graded dialogues and the recall drills (reward 1.0, never graded) are one SFT set
    with open(os.path.join(out, "sft.jsonl"), "wb") as sft:
        for part in ("warm_start.jsonl", "drills.jsonl"):
            with open(os.path.join(out, part), "rb") as handle:
                shutil.copyfileobj(handle, sft)
    _remove_tries(out)
    shutil.rmtree(os.path.join(out, "agent"), ignore_errors=True)
    kept, first, width = None, s.first_try, s.tries_at_once or s.slots()
    while kept is None and first < s.tries:
        # the next trainings side by side (one when there is no check to fail)
        last = min(first + (width - 1 if s.copy_min else 0), s.tries - 1)
        steps = [run.start(f"warm.sft_try{t}", _train_try, run, s, t)
                 for t in range(first, last + 1)]
        run.finish(*steps)
        for attempt, step in zip(range(first, last + 1), steps):
            if s.copy_min:
                _show_check(step.log)
            if _copies(s, attempt):
                kept = attempt
                break
            if attempt < s.tries - 1:
                print(f"warm start: training seed {s.seed + 1000 * attempt} did not learn the "
                      f"copy; training again with seed {s.seed + 1000 * (attempt + 1)}")
        first = last + 1
    if kept is None:
        raise StepFailed(f"the agent did not learn to copy told details (share below "
                         f"COPY_MIN={s.copy_min}) in {s.tries} trainings; raise TRIES or EPOCHS")
    agent = os.path.join(out, "agent")
    os.rename(os.path.join(out, f"try{kept}"), agent)
    if s.copy_min:
        for suffix in ("", ".config.json"):
            os.rename(os.path.join(out, f"try{kept}.copy_check.json{suffix}"),
                      os.path.join(out, f"copy_check.json{suffix}"))
    _remove_tries(out)
    print(f"warm start: kept training seed {s.seed + 1000 * kept}", flush=True)
    if s.measure:
        run.stage("simulate_interactions", "--agent_model", agent, "--env_model", "scripted",
                  "--agent_prompt_path", os.path.join(out, "agent_prompt.txt"),
                  "--input_path", os.path.join(out, "test_tasks.jsonl"), "--num_tasks",
                  str(s.test_tasks), "--output_path", os.path.join(out, "test.jsonl"),
                  "--overwrite", "--temperature", "1.0", "--max_steps", str(s.max_turns()),
                  "--max_new_tokens",
                  str(s.max_new_tokens), "--batch_size", str(s.test_tasks), "--seed",
                  str(s.seed), *run.device_flag)
        run.stage("evaluate_code", os.path.join(out, "test.jsonl"), "--k", "1")
    print(f"mini agent: {agent}", flush=True)
    return agent


def _show_check(log: str) -> None:
    lines: List[str] = [line for line in open(log) if line.startswith("mini_copy_check:")]
    print("".join(lines), end="", flush=True)


def main(argv=None) -> None:
    from sweet_rl.recipes.mini.reproduction import main as recipe

    recipe(argv, build=True)
