"""Stage: grade backend trajectories with the task's hidden unit tests.

The stage is :func:`sweet_rl.stages.evaluate_code.evaluate_code`; its flags are the fields of
:class:`sweet_rl.stages.evaluate_code.EvaluateCodeOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code

    run_stage(evaluate_code, EvaluateCodeOptions, argv)
