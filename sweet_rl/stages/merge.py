"""Stage: join the shard files of a sharded run into the file one unsharded run would write.

Sharded stages (simulate, sample, rank with ``--num_shards N --shard_index I``) each write a
contiguous block of the rows; the merge checks, from the shards' sidecars and line counts,
that the pieces belong to one run and are all complete before it writes anything, then
concatenates them in shard order and writes the sidecar of the equivalent single run (see
:mod:`sweet_rl.stages.sharding`). A refused merge leaves every file as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class MergeOptions(Options):
    """Merge shard files (any order) into --output_path with its ``.config.json`` sidecar.

    Example (three sample shards, e.g. written by three nodes to a shared folder):
        python scripts/merge_shards.py outputs/sampled.shard0.jsonl \\
            outputs/sampled.shard1.jsonl outputs/sampled.shard2.jsonl \\
            --output_path outputs/sampled.jsonl
    """

    POSITIONAL = ("shard_paths",)
    shard_paths: List[str] = flag(
        "every shard file of the run (their sidecars must lie beside them).")
    output_path: str = flag(
        "the merged file; its sidecar records the arguments one run would have (num_shards "
        "1, shard_index 0) and the shard files under ``merged_from``.")
    overwrite: bool = flag("replace an existing output_path.", False)


def merge(opts: MergeOptions) -> str:
    """Merge, print one line; returns the merged file's path."""
    from sweet_rl.stages.sharding import merge_shards

    started = time.time()
    done = merge_shards(opts.shard_paths, opts.output_path, overwrite=opts.overwrite)
    print(f"merge: {done['shards']} shards, {done['rows']} rows in {time.time() - started:.1f}s "
          f"-> {done['output_path']}")
    return done["output_path"]
