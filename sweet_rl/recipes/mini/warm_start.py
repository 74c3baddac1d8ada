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
  1.0, never graded: the SFT stage trains on them beside the dialogues.
``scripts/build_mini_agent.sh`` runs the whole recipe.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import List, Optional

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class WarmStartOptions(Options):
    """Build the base model and write the tasks and the mixed scripted dialogues."""

    POSITIONAL = ("output_dir",)
    output_dir: str = flag("the warm folder (base model, tasks, dialogues, drills, prompt).")
    num_train_tasks: int = flag("train tasks generated (the offline data's tasks).", 240)
    num_test_tasks: int = flag("held-out tasks generated (every evaluation's tasks).", 30)
    mix: str = flag(
        "shares of the scripted askers in the SFT dialogues (``name=share``, comma-separated; "
        "good askers, guessers, wasters).", "asker=0.4,guesser=0.3,waster=0.3")
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
        from sweet_rl.recipes.mini.tasks import select_families
        from sweet_rl.recipes.mini.styles import parse_mix

        parse_mix(self.mix)
        if self.families is not None:
            select_families(self.families)  # unknown names fail here, before any work


def warm_start(opts: WarmStartOptions) -> None:
    """The base model, the two task splits, the warm-start dialogues and the drills."""
    from sweet_rl.recipes.mini.drills import build_drills
    from sweet_rl.recipes.mini.tasks import corpus, generate_tasks
    from sweet_rl.recipes.mini.styles import build_warm_start_trajectories, parse_mix
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.io import write_jsonl, write_sidecar
    from sweet_rl.prompts import load_prompt
    from sweet_rl.recipes.mini import AGENT_PROMPT
    from sweet_rl.models.tiny_model import build_tiny_model

    agent_prompt = load_prompt(AGENT_PROMPT if opts.agent_prompt_path == "mini"
                               else opts.agent_prompt_path, "agent")
    # its tokenizer also learns the miniature's words: about half the tokens per dialogue
    base = build_tiny_model(os.path.join(opts.output_dir, "base"), seed=opts.seed,
                            hidden_size=opts.hidden_size, num_layers=opts.num_layers,
                            extra_text=corpus(), tie_embeddings=opts.tie_embeddings)
    train = generate_tasks(opts.num_train_tasks, opts.seed, "train", opts.families)
    test = generate_tasks(opts.num_test_tasks, opts.seed, "test", opts.families)
    trajectories, styles = build_warm_start_trajectories(
        load_tokenizer(base), train, parse_mix(opts.mix), opts.seed, agent_prompt)
    outputs = {"train_tasks.jsonl": train, "test_tasks.jsonl": test,
               "warm_start.jsonl": trajectories,
               "drills.jsonl": build_drills(load_tokenizer(base), opts.num_drills, opts.seed,
                                             agent_prompt)}
    for name, rows in outputs.items():
        path = os.path.join(opts.output_dir, name)
        write_jsonl(path, rows)
        write_sidecar(path, opts.flags(), "mini_warm_start")
    with open(os.path.join(opts.output_dir, "agent_prompt.txt"), "w",
              encoding="utf-8") as handle:
        handle.write(agent_prompt)
    counts = ", ".join(f"{style} {n}" for style, n in sorted(Counter(styles).items()))
    print(f"mini_warm_start: base model {base}; {len(train)} train tasks ({counts}), "
          f"{len(test)} test tasks, {opts.num_drills} recall drills -> {opts.output_dir}")


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(warm_start, WarmStartOptions, argv)


if __name__ == "__main__":
    main()
