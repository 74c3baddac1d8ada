"""Stage: a critic's Best-of-N curve on held-out tasks (paper Figure 3a), with the scripted human.

    sweet-rl mini best_of_n --agent_model outputs/mini_repro/warm/agent \\
        --tasks outputs/mini_repro/warm/test_tasks.jsonl --output_dir outputs/mini_repro/seed0 \\
        --critic outputs/mini_repro/seed0/critic_sweet \\
        --critic_no_gt outputs/mini_repro/seed0/critic_sweet_no_gt

At every turn the agent samples N replies and a chooser picks the one played
(:class:`sweet_rl.agents.critic_pick.CriticPickAgent`): the SWEET critic (with the task's
reference in front), the critic trained without it, or a uniform random choice. Each
(chooser, N) writes its dialogues to ``OUTPUT_DIR/best_of_n/<chooser>_n<N>.jsonl``, graded in
place by the real grader as ``evaluate_code.py`` does; the success rates go to
``OUTPUT_DIR/best_of_n.json`` and are printed as a table (rows N, columns choosers). At N=1
every chooser plays the same single sample, so it is run once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class MiniBestOfNOptions(Options):
    """Success (%) on --tasks when a chooser picks among N sampled replies at every turn."""

    POSITIONAL = ("agent_model", "tasks", "output_dir")
    agent_model: str = flag("the agent that samples the N replies (the warm folder's ``agent``).")
    tasks: str = flag("miniature tasks (JSONL, the warm folder's ``test_tasks.jsonl``).")
    output_dir: str = flag(
        "where ``best_of_n.json`` (and one dialogue file per chooser and N, under "
        "``best_of_n/``) are written.")
    critic: Optional[str] = flag("the SWEET critic (trained with the reference); one curve.",
                                 None)
    critic_no_gt: Optional[str] = flag(
        "the critic trained without training-time information; one curve.", None)
    ns: List[int] = flag("the values of N, comma-separated.", [1, 2, 4, 8, 16])
    num_tasks: Optional[int] = flag("the first this many tasks (default: all).", None)
    seed: int = flag("sampling seed (each dialogue's seed derives from it and its row).", 0)
    temperature: float = flag("the agent's sampling temperature.", 1.0)
    max_new_tokens: int = flag("the longest reply the agent writes.", 192)
    max_steps: int = flag("turns per dialogue.", 10)
    rollouts: int = flag("dialogues per task (more rows, less noise in each point of the curve).",
                         1)
    score_tokens: str = flag(
        "the critics' scored span (see rank_best_of_n); ``candidate`` by default, as the "
        "miniature's rank stage uses (docs/mini_reproduction.md says why).", "candidate")
    device: Optional[str] = flag("torch device (default: cuda when available, else cpu).", None)
    agent_prompt_path: Optional[str] = flag(
        "the agent's system message (the warm folder's ``agent_prompt.txt``; default: the "
        "bundled prompt).", None)
    critic_regression: Optional[str] = flag(
        "a critic trained with ``train_dpo.py --critic_head regression`` (paper Table 3's "
        "regression head); one curve.", None)
    critic_value: Optional[str] = flag(
        "a critic trained with ``train_dpo.py --critic_head value`` (Figure 3a's value "
        "function); one curve.", None)
    judge: Optional[str] = flag(
        "a model that judges the candidates pairwise (Figure 3a's LLM-as-a-Judge; the paper "
        "uses the agent's base model); one curve.", None)

    def check(self) -> None:
        if not self.ns or min(self.ns) < 1:
            raise ValueError(f"--ns needs positive integers, got {self.ns!r}")


def success_of(path: str) -> float:
    from sweet_rl.io import read_jsonl

    rewards = [float(row["reward"]) for row in read_jsonl(path)]
    return 100 * sum(r >= 1.0 for r in rewards) / max(1, len(rewards))


def play(agent, tasks, path: str, seed: int, max_steps: int, rollouts: int = 1,
         agent_prompt_path: Optional[str] = None) -> float:
    """Every task ``rollouts`` times with ``agent`` and the scripted human (row
    ``i + j * len(tasks)`` is rollout j of task i, simulate's layout); graded; success in %."""
    from sweet_rl.environments import make_env
    from sweet_rl.io import write_jsonl
    from sweet_rl.prompts import load_prompt
    from sweet_rl.rollouts.lockstep import run_dialogues
    from sweet_rl.seeding import row_seed
    from sweet_rl.simulators.scripted_simulator import ScriptedSimulator
    from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code

    agent_prompt = load_prompt(agent_prompt_path, "agent")
    user_prompt = load_prompt(None, "user")
    envs = [make_env("code", task, agent_prompt, user_prompt, max_steps=max_steps)
            for _ in range(rollouts) for task in tasks]
    trajectories = run_dialogues(envs, agent, ScriptedSimulator(),
                                 row_seeds=[row_seed(seed, r) for r in range(len(envs))])
    write_jsonl(path, trajectories)
    evaluate_code(EvaluateCodeOptions(saved_path=path))
    return success_of(path)


def render(curve: Dict[str, Dict[int, float]], ns: Sequence[int]) -> str:
    choosers = list(curve)
    lines = ["| N | " + " | ".join(choosers) + " |", "| --- |" + " --- |" * len(choosers)]
    for n in ns:
        lines.append(f"| {n} | " + " | ".join(f"{curve[c][n]:.1f}" for c in choosers) + " |")
    return "\n".join(lines)


def best_of_n_curve(opts: MiniBestOfNOptions) -> str:
    """Play every chooser at every N, write ``best_of_n.json``, print and return the table."""
    from sweet_rl.agents.critic_pick import CriticPickAgent
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.stages.factory import build_judge
    from sweet_rl.io import write_sidecar
    from sweet_rl.stages.groups import EngineOptions, JudgeOptions

    rows = load_tasks(opts.tasks, opts.num_tasks)

    # play() lays rollout j of task i at position i + j * len(rows), the dialogue's key
    def truth_of(key):
        return rows[key % len(rows)].ground_truth

    # name -> (file slug, critic type, model, with the reference); random first: at N=1 its
    # single sample is every chooser's pick
    choosers = {"random": ("random", "random", None, True),
                "sweet critic": ("sweet", "logprob", opts.critic, True),
                "critic w/o training-time info": ("no_gt", "logprob", opts.critic_no_gt, False),
                "regression head": ("regression", "regression", opts.critic_regression, True),
                "value function": ("value", "value", opts.critic_value, True),
                "LLM-as-a-Judge": ("judge", "judge", opts.judge, True)}
    choosers = {name: spec for name, spec in choosers.items()
                if name == "random" or spec[2] is not None}
    folder = os.path.join(opts.output_dir, "best_of_n")
    os.makedirs(folder, exist_ok=True)
    curve: Dict[str, Dict[int, float]] = {name: {} for name in choosers}
    for n in opts.ns:
        for name, (slug, kind, model, use_truth) in choosers.items():
            if n == 1 and name != "random":
                curve[name][1] = curve["random"][1]
                continue
            picker = None if model is None else build_judge(
                JudgeOptions(critic_type=kind, model_id=model, no_use_ground_truth=not use_truth,
                             score_tokens=opts.score_tokens), EngineOptions(device=opts.device))
            agent = CriticPickAgent(opts.agent_model, n, truth_of, judge=picker,
                                    temperature=opts.temperature,
                                    max_new_tokens=opts.max_new_tokens, device=opts.device)
            try:
                curve[name][n] = play(agent, rows, os.path.join(folder, f"{slug}_n{n}.jsonl"),
                                      opts.seed, opts.max_steps, opts.rollouts,
                                      opts.agent_prompt_path)
            finally:
                agent.close()
    out = os.path.join(opts.output_dir, "best_of_n.json")
    with open(out, "w") as handle:
        json.dump({"ns": opts.ns, "success": curve}, handle, indent=1)
    write_sidecar(out, opts.flags(), "mini_best_of_n")
    table = render(curve, opts.ns)
    print(table)
    return table


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(best_of_n_curve, MiniBestOfNOptions, argv)


if __name__ == "__main__":
    main()
