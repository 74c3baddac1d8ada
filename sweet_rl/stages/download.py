"""Stage 0: copy a ColBench file (from the hub or a local path) to a working location."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class DownloadOptions(Options):
    """Copy SOURCE (``hf://OWNER/DATASET/FILE`` or a path) to DESTINATION.

    Later stages write into their inputs (evaluate adds rewards), so pipelines work on a copy.

    Example:
        python scripts/download_data.py \\
            hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl data/backend_test.jsonl
    """

    POSITIONAL = ("source", "destination")
    source: str = flag(
        "the JSONL file to copy: ``hf://OWNER/DATASET/FILE`` (a file of a dataset repository "
        "on the Hugging Face hub, downloaded first) or a local path.")
    destination: str = flag("where the copy goes (a .config.json sidecar is written beside it).")
    num_rows: Optional[int] = flag(
        "keep only the first rows (all when omitted). Every row is checked to be JSON.", None)
    cache_dir: Optional[str] = flag(
        "the hub download cache (default: the huggingface_hub cache, ~/.cache).", None)


def download_data(opts: DownloadOptions) -> str:
    """Copy the file, write its sidecar, print one line; returns the destination."""
    from sweet_rl.data.tasks import resolve_input_path
    from sweet_rl.io import iter_jsonl, write_jsonl, write_sidecar

    local = resolve_input_path(opts.source, opts.cache_dir)
    rows = []
    for row in iter_jsonl(local):
        if opts.num_rows is not None and len(rows) >= opts.num_rows:
            break
        rows.append(row)
    write_jsonl(opts.destination, rows)
    write_sidecar(opts.destination, opts.flags(), "download_data")
    print(f"download_data: {len(rows)} rows from {opts.source} -> {opts.destination}")
    return opts.destination
