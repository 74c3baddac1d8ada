"""Stage: write the scripted offline trajectories of :mod:`sweet_rl.data.offline_demo`.

    python -m sweet_rl.cli.offline_demo outputs/offline.jsonl --tokenizer outputs/tiny-llama

The dialogues themselves (scripted agent and human, played through the real environments)
are library code in :mod:`sweet_rl.data.offline_demo`; this module only loads the tasks and
the tokenizer, opens the renderer for ``--task_type html`` and writes the file, so the data
package never reaches up into the command-line layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sweet_rl.data.offline_demo import ROLLOUTS, build_offline_trajectories
from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class OfflineDemoOptions(Options):
    """Write the scripted offline trajectories (unevaluated) to OUTPUT_PATH."""

    POSITIONAL = ("output_path", "tokenizer", "input_path")
    output_path: str = flag("the trajectories (JSONL, the simulate stage's layout).")
    tokenizer: Optional[str] = flag(
        "a model or tokenizer folder whose chat template lays out the agent's prompts "
        "(default: the bundled tiny model's).", None)
    input_path: Optional[str] = flag("the tasks (default: the bundled demo tasks).", None)
    rollouts: int = flag("dialogues per task (scripted agents, some of which succeed).",
                         ROLLOUTS)
    task_type: str = flag("``code`` (backend) or ``html`` (frontend; the pages are rendered).",
                          "code", choices=("code", "html"))
    screenshot_dir: Optional[str] = flag(
        "where frontend screenshots go (``--task_type html``).", None)


def offline_demo(opts: OfflineDemoOptions) -> None:
    """Play the scripted dialogues and write them with their sidecar."""
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.io import write_jsonl, write_sidecar
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.stages.factory import resolve_model

    arguments = opts.flags()
    tasks = load_tasks(opts.input_path, task_type=opts.task_type)
    tokenizer = load_tokenizer(resolve_model(opts.tokenizer))
    pool = None
    env_kwargs = {}
    try:
        if opts.task_type == "html":
            from sweet_rl.rendering.pool import open_renderer
            from sweet_rl.rendering.screenshots import default_screenshot_dir

            pool, arguments["browser_version"] = open_renderer()
            env_kwargs = dict(renderer=pool, output_path=opts.output_path,
                              screenshot_dir=opts.screenshot_dir
                              or default_screenshot_dir(opts.output_path))
        trajectories = build_offline_trajectories(tokenizer, tasks, opts.rollouts,
                                                  opts.task_type, env_kwargs)
    finally:
        if pool is not None:
            pool.close()
    write_jsonl(opts.output_path, trajectories)
    write_sidecar(opts.output_path, arguments, "offline_demo")
    print(f"offline_demo: {len(trajectories)} scripted trajectories "
          f"({len(tasks)} tasks x {opts.rollouts}) -> {opts.output_path}")


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(offline_demo, OfflineDemoOptions, argv)


if __name__ == "__main__":
    main()
