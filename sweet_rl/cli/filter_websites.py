"""Stage: keep the frontend tasks whose reference page renders.

The stage is :func:`sweet_rl.stages.filter_websites.filter_websites`; its flags are the fields of
:class:`sweet_rl.stages.filter_websites.FilterOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.filter_websites import FilterOptions, filter_websites

    run_stage(filter_websites, FilterOptions, argv)
