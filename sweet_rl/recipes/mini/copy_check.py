"""Stage (warm-start check): does a miniature agent write back the details it was told?

    sweet-rl mini copy_check outputs/mini/agent outputs/mini/train_tasks.jsonl

The skill every success on the miniature ColBench needs is a copy: after asking, the agent
writes each told sentence as a comment and its value as a constant. A tiny agent learns it in
a sudden jump somewhere past a thousand SFT updates, and whether the jump has happened by the
end of a fixed budget depends on the seed and on the machine's floating-point kernels (the
same recipe gave 48.5% and 3.0% held-out success with seeds 1 and 2 of one machine;
docs/mini_warm_start.md). The warm agent's build (:mod:`sweet_rl.recipes.mini.build_agent`)
asks this check whether it has, and trains again with the next seed when it has not.

The check plays the scripted asker's dialogue (every hidden detail asked and told; on the
followup family, :mod:`sweet_rl.recipes.mini.followup_tasks`, the thorough style's) on
``num_tasks`` tasks of the given file, lets the agent write the final answer greedily from
that dialogue, and counts an answer whose code is the reference's, comments and blank lines
aside (as the miniature's oracle does: :func:`sweet_rl.recipes.mini.critic_check.code_lines`).
Give it *train* tasks: the held-out tasks stay unseen by every choice made before evaluation.
It prints one line and writes ``{"copied", "checked", "share"}`` to ``--output_path``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class CopyCheckOptions(Options):
    """Share of --num_tasks asker dialogues (of TASKS) whose final answer, written greedily by
    AGENT_MODEL, is the reference."""

    POSITIONAL = ("agent_model", "tasks")
    agent_model: str = flag("the warm agent to check.")
    tasks: str = flag("miniature tasks (JSONL; the warm folder's ``train_tasks.jsonl``).")
    num_tasks: int = flag("how many asker dialogues (the first tasks of TASKS).", 30)
    agent_prompt_path: Optional[str] = flag(
        "the agent's system message (the warm folder's ``agent_prompt.txt``; default: the "
        "bundled prompt).", None)
    max_new_tokens: int = flag("the longest final answer the agent writes.", 192)
    output_path: Optional[str] = flag(
        "also write ``{\"copied\", \"checked\", \"share\"}`` here (JSON).", None)
    device: Optional[str] = flag("torch device (default: cuda when available, else cpu).", None)

    def check(self) -> None:
        if self.num_tasks < 1:
            raise ValueError(f"--num_tasks must be at least 1, got {self.num_tasks}")


def copied(answer: str, reference: str) -> bool:
    """Whether an answer's code is the reference's (comments and blank lines aside)."""
    from sweet_rl.recipes.mini.critic_check import code_lines

    lines = code_lines(answer)
    return lines is not None and lines == code_lines(reference)


def copy_check(opts: CopyCheckOptions) -> dict:
    """Play the asker dialogues, let the agent answer greedily, count the copies."""
    import json

    from sweet_rl.models.hf_generation import HFGenerator
    from sweet_rl.io import read_jsonl, write_sidecar
    from sweet_rl.prompts import load_prompt
    from sweet_rl.records import Task
    from sweet_rl.recipes.mini.family_sets import FAMILY_SETS, build_dialogues
    from sweet_rl.recipes.mini.followup_tasks import is_followup

    rows = read_jsonl(opts.tasks, Task.from_dict)[:opts.num_tasks]
    generator = HFGenerator(opts.agent_model, device=opts.device,
                            max_new_tokens=opts.max_new_tokens, temperature=0.0, batch_size=16)
    # a file of followup tasks is checked on the followup family's dialogue that asks all
    family = FAMILY_SETS["followup" if rows and all(map(is_followup, rows)) else "basic"]
    played = build_dialogues(family.name)(
        generator.tokenizer, rows, (family.told_style,),
        agent_prompt=load_prompt(opts.agent_prompt_path, "agent"))
    # the asker's last turn is its answer: the agent writes it from the same input
    prompts = [trajectory.dialogue_history[-1].input for trajectory in played]
    answers = generator.generate(prompts)
    right = sum(copied(answer, task.ground_truth) for answer, task in zip(answers, rows))
    summary = {"copied": right, "checked": len(rows), "share": right / len(rows)}
    if opts.output_path:
        with open(opts.output_path, "w", encoding="utf-8") as handle:
            json.dump(summary, handle)
        write_sidecar(opts.output_path, opts.flags(), "mini_copy_check")
    print(f"mini_copy_check: {right} of {len(rows)} told dialogues answered with the reference "
          f"({100 * summary['share']:.1f}%), greedy, {opts.agent_model}")
    return summary


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(copy_check, CopyCheckOptions, argv)


if __name__ == "__main__":
    main()
