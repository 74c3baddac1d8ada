"""Stage: N candidate actions at every assistant turn, with reference log-probs.

The stage is :func:`sweet_rl.stages.sample.sample`; its flags are the fields of
:class:`sweet_rl.stages.sample.SampleOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.sample import SampleOptions, sample

    run_stage(sample, SampleOptions, argv)
