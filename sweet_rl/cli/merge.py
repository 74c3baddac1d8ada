"""Stage: join the shard files of a sharded run into the file one run would write.

The stage is :func:`sweet_rl.stages.merge.merge`; its flags are the fields of
:class:`sweet_rl.stages.merge.MergeOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.merge import MergeOptions, merge

    run_stage(merge, MergeOptions, argv)
