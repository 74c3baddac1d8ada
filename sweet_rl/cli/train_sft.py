"""Stage: supervised fine-tuning on successful trajectories (the rejection fine-tuning baseline).

The stage is :func:`sweet_rl.stages.train.train_sft`; its flags are the fields of
:class:`sweet_rl.training.options.SFTOptions` (``--help`` lists them), defaults < ``--config``
file < the command line.
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.train import train_sft
    from sweet_rl.training.options import SFTOptions

    run_stage(train_sft, SFTOptions, argv)
