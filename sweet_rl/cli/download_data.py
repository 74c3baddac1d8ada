"""Stage 0: copy a ColBench file (hub or local) to a working location.

The stage is :func:`sweet_rl.stages.download.download_data`; its flags are the fields of
:class:`sweet_rl.stages.download.DownloadOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.download import DownloadOptions, download_data

    run_stage(download_data, DownloadOptions, argv)
