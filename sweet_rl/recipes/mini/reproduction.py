"""Recipe: the miniature reproduction (``sweet-rl mini run``; docs/mini_reproduction.md).

On the miniature ColBench (scripted human), every method of the paper's Table 2 is trained
from the same warm-started tiny agent with the project's real stages and files, on the CPU,
then a table of held-out success and tests passed over seeds. Per seed, all from the warm
agent W and the same offline data:

  zero-shot       W itself
  rft             SFT on the offline dialogues that passed every test
  multiturn_dpo   DPO on trajectory pairs, loss on every agent turn
  sweet           critic with the reference (training-time information) -> N candidates per
                  turn -> critic ranking -> per-turn pairs -> agent DPO
  sweet_no_gt     ablation: the critic without the reference (trained and ranking on input)
  sweet_sum       ablation: summed instead of per-token mean log-probs, critic and ranking

``family`` picks the task family set (:mod:`sweet_rl.recipes.mini.family_sets`: the basic
families or the followup family, with its turn limit); ``fractions`` adds the data-scaling
sweep and ``match_steps`` matched gradient steps (:mod:`sweet_rl.recipes.mini.methods`).
``sweet-rl mini credit`` runs both family sets side by side.

Seeds run side by side, and within a seed every step starts as soon as its inputs exist
(:mod:`sweet_rl.recipes.mini.schedule`); each step's output is in ``OUT/logs/<seed>.<step>.log``.
``sweet-rl mini quick`` is the same run on the quick miniature (:data:`settings.QUICK`).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import List, Optional, Sequence

from sweet_rl.recipes.mini.methods import Methods
from sweet_rl.recipes.mini.schedule import Scheduler, Step, StepFailed
from sweet_rl.recipes.mini.settings import (QUICK, BuildSettings, RunSettings,
                                            from_environment)
from sweet_rl.recipes.mini.subset import tag


def configs_folder() -> str:
    """The repository's ``configs/`` (the methods' training configs), beside the package."""
    import sweet_rl

    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sweet_rl.__file__))),
                          "configs")
    if not os.path.isfile(os.path.join(folder, "critic_backend.json")):
        raise FileNotFoundError(f"{folder}: the training configs (critic_backend.json, ...) are "
                                "missing; run the miniature from a checkout of the repository")
    return folder


def seed_run(m: Methods, seed: int) -> None:
    """One seed: every method from the warm agent and this seed's offline data."""
    s, run = m.s, m.run
    folder = os.path.join(s.out, f"seed{seed}")
    os.makedirs(folder, exist_ok=True)
    waiting: List[Step] = [run.start(f"seed{seed}.zero_shot", m.evaluate, "zero_shot", m.agent,
                                     seed, folder)]
    offline = os.path.join(folder, "offline.jsonl")
    if s.offline_from:
        run.say(f"offline data from {s.offline_from} ({s.k} rollouts per task)")
        shutil.copyfile(s.offline_from, offline)
    else:
        run.say(f"offline data: {s.k} rollouts on {s.offline_tasks} train tasks")
        run.stage("simulate_interactions", "--agent_model", m.agent, *m.sim, "--input_path",
                  os.path.join(m.warm, "train_tasks.jsonl"), "--num_tasks",
                  str(s.offline_tasks), "--best_of_n", str(s.k), "--batch_size",
                  str(s.offline_tasks), "--output_path", offline, "--overwrite", "--seed",
                  str(seed))
    critic_pairs = os.path.join(folder, "critic_pairs.jsonl")
    trajectory_pairs = os.path.join(folder, "trajectory_pairs.jsonl")
    run.stage("evaluate_code", offline, "--k", str(s.k), "--preference_path", trajectory_pairs,
              "--ground_truth_preference_path", critic_pairs)

    # everything below needs only the offline data (and the warm agent)
    tags = {fraction: tag(fraction) for fraction in s.fractions}
    for fraction, part in tags.items():  # the sweep's parts and their pairs
        m.offline_part(seed, folder, fraction, part)
    # with match_steps, the baselines wait for SWEET-RL's pairs on the same data (the whole
    # set or a part) and train for as many updates as its agent does
    ready = {part: threading.Event() for part in ["", *tags.values()]} if s.match_steps \
        else {}
    if "rft" in s.methods:
        waiting.append(run.start(f"seed{seed}.rft", m.rejection_fine_tuning, seed, folder,
                                 ready.get("")))
    if "multiturn_dpo" in s.methods:
        for part in ["", *tags.values()]:
            waiting.append(run.start(f"seed{seed}.multiturn_dpo{'_' + part if part else ''}",
                                     m.multiturn_dpo, seed, folder, part, ready.get(part)))
    critics = {}  # (variant, part of the sweep or "") -> its critic's training
    for variant, pairs, extra in (("sweet", critic_pairs, ()),
                                  ("sweet_no_gt", trajectory_pairs, ()),
                                  ("sweet_sum", critic_pairs, ("--mean_log_prob", "False"))):
        if variant in s.methods:
            critics[variant, ""] = run.start(f"seed{seed}.critic_{variant}", m.train_critic,
                                             variant, seed, folder, pairs, *extra)
    if "sweet" in s.methods:
        for part in tags.values():
            critics["sweet", part] = run.start(
                f"seed{seed}.critic_sweet_{part}", m.train_critic, f"sweet_{part}", seed,
                folder, os.path.join(folder, f"critic_pairs_{part}.jsonl"))
    curve = bool(s.bon_ns) and seed == s.seeds[0]
    extras = [run.start(f"seed{seed}.critic_{kind}", m.extra_critic, kind, seed, folder)
              for kind in (s.bon_critics if curve else []) if kind != "judge"]

    if critics:
        run.say(f"SWEET-RL and its ablations: {s.num_samples} candidates per turn")
        m.sample_candidates(seed, folder, s.sample_shards or s.slots())
        if s.family == "followup":  # the properties credit over turns needs: a diagnostic
            run.mini("followup_check", "--offline", offline, "--k", str(s.k), "--sampled",
                     os.path.join(folder, "sampled.jsonl"), "--output_path",
                     os.path.join(folder, "properties.json"))
        if "sweet" in s.methods:
            for fraction, part in tags.items():
                m.sampled_part(folder, fraction, part)
    for (variant, part), critic in critics.items():
        run.finish(critic)
        name = variant + (f"_{part}" if part else "")
        waiting.append(run.start(f"seed{seed}.{name}", m.sweet_agent, variant, seed, folder,
                                 part, ready.get(part) if variant == "sweet" else None))
    if curve:
        run.say(f"the critics' Best-of-N curve (N = {','.join(map(str, s.bon_ns))})")
        if extras:
            run.finish(*extras)
        m.best_of_n_curve(seed, folder)
    run.finish(*waiting)


def reproduce(s: RunSettings, run: Optional[Scheduler] = None) -> None:
    """The warm agent (built once, then reused), every seed side by side, then the table;
    ``run``: a scheduler to run on (default: one of its own)."""
    started = time.time()
    configs = configs_folder()
    os.makedirs(s.out, exist_ok=True)
    logs = s.logs or os.path.join(s.out, "logs")
    run = run or Scheduler.for_settings(s, logs)
    warm = s.warm or os.path.join(s.out, "warm")
    if not os.path.isfile(os.path.join(warm, "agent", "config.json")):
        from sweet_rl.recipes.mini.build_agent import build_agent

        shared = {name: getattr(s, name) for name in BuildSettings.__dataclass_fields__
                  if name in RunSettings.__dataclass_fields__ and name != "max_new_tokens"}
        build_agent(BuildSettings(**dict(shared, out=warm, measure=False, logs=logs)), run)
    methods = Methods(s, run, warm, configs)
    # the first seed's chain is the longest (it carries the Best-of-N curve): its stages first
    run.finish(*(run.start(f"seed{seed}", seed_run, methods, seed, priority=rank)
                 for rank, seed in enumerate(s.seeds)))
    run.mini("table", s.out, "--seconds", str(int(time.time() - started)))


def check_device(device: str, python: str) -> None:
    """``cuda`` with no GPU visible stops here, before anything is written."""
    if device == "cuda":
        import subprocess

        probe = "import sys, torch; sys.exit(not torch.cuda.is_available())"
        if subprocess.run([python, "-c", probe]).returncode:
            raise ValueError(f"--device {device} (DEVICE): torch sees no CUDA GPU here")


def main(argv: Optional[Sequence[str]] = None, quick: bool = False,
         build: bool = False) -> None:
    """``sweet-rl mini run`` (``quick``: ``sweet-rl mini quick``; ``build``: ``sweet-rl mini
    build_agent``): settings from the environment and the command line, then the recipe."""
    from sweet_rl.flags.help import render_help
    from sweet_rl.flags.parse import HelpRequested

    cls = BuildSettings if build else RunSettings
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = from_environment(cls, args, os.environ, QUICK if quick else None)
        check_device(settings.device, settings.python)
    except HelpRequested:
        from sweet_rl.flags.command import _print

        _print(render_help(cls, os.path.basename(sys.argv[0] or "recipe")) + "\n\nEvery flag "
               "is also an environment variable of its name in capitals (SEEDS=\"0 1\")" +
               ("; the quick miniature's settings (QUICK in sweet_rl/recipes/mini/settings.py) "
                "replace the defaults of " + ", ".join(QUICK) if quick else "") + ".")
        return
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    try:
        if build:
            from sweet_rl.recipes.mini.build_agent import build_agent

            logs = settings.logs or os.path.join(settings.out, "logs")
            build_agent(settings, Scheduler.for_settings(settings, logs))
        else:
            reproduce(settings)
    except (StepFailed, OSError) as err:
        print(f"{os.path.basename(sys.argv[0] or 'recipe')}: {err}", file=sys.stderr)
        sys.exit(1)
