"""Stage: the data of the miniature ColBench's warm start.

    sweet-rl mini warm_start outputs/mini --num_train_tasks 240

Writes into ``output_dir``:

* ``base/``: a fresh tiny Llama with the local tokenizer (:mod:`sweet_rl.models.tiny_model`), of
  the size asked for: the model the SFT stage then warm-starts;
* ``train_tasks.jsonl``, ``test_tasks.jsonl``: generated tasks of the two splits
  (:mod:`sweet_rl.recipes.mini.tasks`), the test ones held out;
* ``warm_start.jsonl``: one scripted dialogue per train task, styles in the proportions of
  ``--mix`` (:mod:`sweet_rl.recipes.mini.styles`), unevaluated: ``evaluate_code.py`` grades
  it and ``train_sft.py`` trains on it;
* ``drills.jsonl``: ``--num_drills`` recall drills (:mod:`sweet_rl.recipes.mini.drills`), reward
  1.0, never graded: the SFT stage trains on them beside the dialogues;
* ``valid_tasks.jsonl`` (``--family followup`` with ``--num_valid_tasks``): tasks of the
  validation split, on which settings may be chosen without looking at the test tasks.

``--family followup`` writes the followup family's tasks, styles and drills
(:mod:`sweet_rl.recipes.mini.family_sets`); its tokenizer learns both families' words.
``scripts/build_mini_agent.sh`` runs the whole recipe.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import List, Optional

from sweet_rl.flags import Options, flag

# the warm_start command's own default mix for the basic families (the recipes pass theirs)
DEFAULT_BASIC_MIX = "asker=0.4,guesser=0.3,waster=0.3"


@dataclass(kw_only=True)
class WarmStartOptions(Options):
    """Build the base model and write the tasks and the mixed scripted dialogues."""

    POSITIONAL = ("output_dir",)
    output_dir: str = flag("the warm folder (base model, tasks, dialogues, drills, prompt).")
    num_train_tasks: int = flag("train tasks generated (the offline data's tasks).", 240)
    num_test_tasks: int = flag("held-out tasks generated (every evaluation's tasks).", 30)
    mix: Optional[str] = flag(
        "shares of the scripted styles in the SFT dialogues (``name=share``, comma-separated; "
        "basic: asker, guesser, waster; followup: thorough, skipper, guesser, waster; "
        "default: asker=0.4,guesser=0.3,waster=0.3, or the followup family's mix).", None)
    family: str = flag("the task family set: basic (the four families of tasks.py) or "
                       "followup (followup_tasks.py).", "basic")
    num_valid_tasks: int = flag("validation tasks written to ``valid_tasks.jsonl`` (followup "
                                "only; 0: none).", 0)
    seed: int = flag("seed of the tasks, the dialogues and the base model's weights.", 0)
    hidden_size: int = flag("the base model's hidden size.", 128)
    num_layers: int = flag("the base model's number of layers.", 2)
    tie_embeddings: bool = flag("tie the input and output embeddings.", False)
    num_drills: int = flag("recall drills written beside the dialogues.", 1500)
    families: Optional[List[str]] = flag(
        "comma-separated family names (``late_fee``; default all four) to restrict the tasks "
        "to: the smaller miniature of the learning test and the demo. The drills (and the "
        "tokenizer's corpus) keep every family's details: drills of one family's three "
        "details did not teach the copy at all (1602 updates: 3 of 36 values right on fresh "
        "drills), and drills of all nine carry twice the copies per row.", None)
    agent_prompt_path: str = flag(
        "the agent's system message in every dialogue and drill (``auto``: the bundled one; "
        "``mini``: the short miniature prompt); copied to ``agent_prompt.txt``, which every "
        "later stage of the miniature passes as ``--agent_prompt_path``.", "auto")

    def check(self) -> None:
        from sweet_rl.recipes.mini.family_sets import family_set
        from sweet_rl.recipes.mini.styles import parse_mix
        from sweet_rl.recipes.mini.tasks import select_families

        family = family_set(self.family)
        if family.name == "followup" and self.families is not None:
            raise ValueError("--families picks among the basic families; leave it out with "
                             "--family followup")
        if family.name == "basic" and self.num_valid_tasks:
            raise ValueError("--num_valid_tasks needs --family followup (the basic families "
                             "have no validation split)")
        if self.num_valid_tasks < 0:
            raise ValueError(f"--num_valid_tasks must be 0 or more, got {self.num_valid_tasks}")
        parse_mix(self.shares_text(), family.styles)
        if self.families is not None:
            select_families(self.families)  # unknown names fail here, before any work

    def shares_text(self) -> str:
        """The mix asked for, or the family's default one."""
        if self.mix:
            return self.mix
        from sweet_rl.recipes.mini.family_sets import family_set

        return DEFAULT_BASIC_MIX if self.family == "basic" else family_set(self.family).mix


def _basic_outputs(opts: WarmStartOptions, agent_prompt: str, shares):
    """The basic families' base model, tasks, dialogues and drills."""
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.models.tiny_model import build_tiny_model
    from sweet_rl.recipes.mini.drills import build_drills
    from sweet_rl.recipes.mini.styles import build_warm_start_trajectories
    from sweet_rl.recipes.mini.tasks import corpus, generate_tasks

    # its tokenizer also learns the miniature's words: about half the tokens per dialogue
    base = build_tiny_model(os.path.join(opts.output_dir, "base"), seed=opts.seed,
                            hidden_size=opts.hidden_size, num_layers=opts.num_layers,
                            extra_text=corpus(), tie_embeddings=opts.tie_embeddings)
    tokenizer = load_tokenizer(base)
    train = generate_tasks(opts.num_train_tasks, opts.seed, "train", opts.families)
    trajectories, styles = build_warm_start_trajectories(tokenizer, train, shares, opts.seed,
                                                         agent_prompt)
    return base, styles, {
        "train_tasks.jsonl": train,
        "test_tasks.jsonl": generate_tasks(opts.num_test_tasks, opts.seed, "test",
                                           opts.families),
        "warm_start.jsonl": trajectories,
        "drills.jsonl": build_drills(tokenizer, opts.num_drills, opts.seed, agent_prompt)}


def _followup_outputs(opts: WarmStartOptions, agent_prompt: str, shares):
    """The followup family's base model (its tokenizer also learns the basic families' words,
    which its drills use), tasks of each split, dialogues and drills."""
    import itertools

    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.models.tiny_model import build_tiny_model
    from sweet_rl.recipes.mini import followup_tasks as followup
    from sweet_rl.recipes.mini.followup_dialogues import (STYLES, build_followup_drills,
                                                          build_followup_trajectories)
    from sweet_rl.recipes.mini.styles import build_warm_start_trajectories
    from sweet_rl.recipes.mini.tasks import corpus

    base = build_tiny_model(os.path.join(opts.output_dir, "base"), seed=opts.seed,
                            hidden_size=opts.hidden_size, num_layers=opts.num_layers,
                            extra_text=itertools.chain(corpus(), followup.corpus()),
                            tie_embeddings=opts.tie_embeddings)
    tokenizer = load_tokenizer(base)
    train = followup.generate_tasks(opts.num_train_tasks, opts.seed, "train")
    trajectories, styles = build_warm_start_trajectories(
        tokenizer, train, shares, opts.seed, agent_prompt, STYLES, build_followup_trajectories)
    outputs = {"train_tasks.jsonl": train,
               "test_tasks.jsonl": followup.generate_tasks(opts.num_test_tasks, opts.seed,
                                                           "test"),
               "warm_start.jsonl": trajectories,
               "drills.jsonl": build_followup_drills(tokenizer, opts.num_drills, opts.seed,
                                                     agent_prompt)}
    if opts.num_valid_tasks:
        outputs["valid_tasks.jsonl"] = followup.generate_tasks(opts.num_valid_tasks, opts.seed,
                                                               "valid")
    return base, styles, outputs


def warm_start(opts: WarmStartOptions) -> None:
    """The base model, the task splits, the warm-start dialogues and the drills."""
    from sweet_rl.io import write_jsonl, write_sidecar
    from sweet_rl.prompts import load_prompt
    from sweet_rl.recipes.mini import AGENT_PROMPT
    from sweet_rl.recipes.mini.family_sets import family_set
    from sweet_rl.recipes.mini.styles import parse_mix

    agent_prompt = load_prompt(AGENT_PROMPT if opts.agent_prompt_path == "mini"
                               else opts.agent_prompt_path, "agent")
    shares = parse_mix(opts.shares_text(), family_set(opts.family).styles)
    build = _followup_outputs if opts.family == "followup" else _basic_outputs
    base, styles, outputs = build(opts, agent_prompt, shares)
    for name, rows in outputs.items():
        path = os.path.join(opts.output_dir, name)
        write_jsonl(path, rows)
        write_sidecar(path, opts.flags(), "mini_warm_start")
    with open(os.path.join(opts.output_dir, "agent_prompt.txt"), "w",
              encoding="utf-8") as handle:
        handle.write(agent_prompt)
    counts = ", ".join(f"{style} {n}" for style, n in sorted(Counter(styles).items()))
    print(f"mini_warm_start: base model {base}; {opts.family} family, "
          f"{len(outputs['train_tasks.jsonl'])} train tasks ({counts}), "
          f"{len(outputs['test_tasks.jsonl'])} test tasks, {opts.num_drills} recall drills -> "
          f"{opts.output_dir}")


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(warm_start, WarmStartOptions, argv)


if __name__ == "__main__":
    main()
