"""Stage: per-turn DPO pairs (or SFT records) from ranked step records.

The stage is :func:`sweet_rl.stages.pairs.pairs`; its flags are the fields of
:class:`sweet_rl.stages.pairs.PairsOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.pairs import PairsOptions, pairs

    run_stage(pairs, PairsOptions, argv)
