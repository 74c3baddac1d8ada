"""Stage: the critic scores every sampled candidate (``judge_result``).

The stage is :func:`sweet_rl.stages.rank.rank`; its flags are the fields of
:class:`sweet_rl.stages.rank.RankOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.rank import RankOptions, rank

    run_stage(rank, RankOptions, argv)
