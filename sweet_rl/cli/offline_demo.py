"""Stage: write the scripted offline trajectories of :mod:`sweet_rl.data.offline_demo`.

    python -m sweet_rl.cli.offline_demo outputs/offline.jsonl --tokenizer outputs/tiny-llama

The dialogues themselves (scripted agent and human, played through the real environments)
are library code in :mod:`sweet_rl.data.offline_demo`; this module only loads the tasks and
the tokenizer, opens the renderer for ``--task_type html`` and writes the file, so the data
package never reaches up into the command-line layer.
"""

from __future__ import annotations

from typing import Optional

from sweet_rl.data.offline_demo import ROLLOUTS, build_offline_trajectories


def main(output_path: str, tokenizer: Optional[str] = None, input_path: Optional[str] = None,
         rollouts: int = ROLLOUTS, task_type: str = "code", screenshot_dir: Optional[str] = None):
    """Write the scripted offline trajectories (unevaluated) to ``output_path``.

    Args:
        output_path: the trajectories (JSONL, the simulate stage's layout).
        tokenizer: a model or tokenizer folder whose chat template lays out the agent's prompts
            (default: the bundled tiny model's).
        input_path: the tasks (default: the bundled demo tasks).
        rollouts: dialogues per task (scripted agents, some of which succeed).
        task_type: ``code`` (backend) or ``html`` (frontend; the pages are rendered).
        screenshot_dir: where frontend screenshots go (``--task_type html``).
    """
    arguments = dict(locals())
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.factory import resolve_model
    from sweet_rl.hf_generation import load_tokenizer
    from sweet_rl.io import write_jsonl, write_sidecar

    tasks = load_tasks(input_path, task_type=task_type)
    tokenizer_ = load_tokenizer(resolve_model(tokenizer))
    pool = None
    env_kwargs = {}
    try:
        if task_type == "html":
            from sweet_rl.rendering.pool import open_renderer
            from sweet_rl.rendering.screenshots import default_screenshot_dir

            pool, arguments["browser_version"] = open_renderer()
            env_kwargs = dict(renderer=pool, output_path=output_path,
                              screenshot_dir=screenshot_dir or default_screenshot_dir(output_path))
        trajectories = build_offline_trajectories(
            tokenizer_, tasks, rollouts, task_type, env_kwargs
        )
    finally:
        if pool is not None:
            pool.close()
    write_jsonl(output_path, trajectories)
    write_sidecar(output_path, arguments, "offline_demo")
    print(
        f"offline_demo: {len(trajectories)} scripted trajectories "
        f"({len(tasks)} tasks x {rollouts}) -> {output_path}"
    )


if __name__ == "__main__":
    from sweet_rl.cli.common import run_cli

    run_cli(main)
