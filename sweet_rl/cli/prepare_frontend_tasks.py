"""Stage: the frontend train/test task files from WebSight v0.2.

The stage is :func:`sweet_rl.stages.prepare_frontend.prepare_frontend_tasks`; its flags are
the fields of :class:`sweet_rl.stages.prepare_frontend.PrepareFrontendOptions` (``--help``
lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.prepare_frontend import PrepareFrontendOptions, prepare_frontend_tasks

    run_stage(prepare_frontend_tasks, PrepareFrontendOptions, argv)
