"""Stage: preference training (the critic, the agent's DPO, the multi-turn DPO baseline, and
the scalar-head critics).

The stage is :func:`sweet_rl.stages.train.train_dpo`; its flags are the fields of
:class:`sweet_rl.training.options.PreferenceOptions` (``--help`` lists them), defaults <
``--config`` file < the command line.
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    run_stage(train_dpo, PreferenceOptions, argv)
