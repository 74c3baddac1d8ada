"""Stage 0: copy a ColBench file (from the hub or a local path) to a working location.

Later stages write into their inputs (evaluate adds rewards), so pipelines work on a copy.
"""

from __future__ import annotations

from typing import Optional


def main(source: str, destination: str, num_rows: Optional[int] = None,
         cache_dir: Optional[str] = None):
    """Copy ``source`` (``hf://OWNER/DATASET/FILE`` or a path) to ``destination``.

    Example:
        python scripts/download_data.py \\
            hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl data/backend_test.jsonl

    Args:
        source: the JSONL file to copy: ``hf://OWNER/DATASET/FILE`` (a file of a dataset
            repository on the Hugging Face hub, downloaded first) or a local path.
        destination: where the copy goes (a .config.json sidecar is written beside it).
        num_rows: keep only the first rows (all when omitted). Every row is checked to be JSON.
        cache_dir: the hub download cache (default: the huggingface_hub cache, ~/.cache).
    """
    arguments = dict(locals())
    from sweet_rl.data.tasks import resolve_input_path
    from sweet_rl.io import iter_jsonl, write_jsonl, write_sidecar

    local = resolve_input_path(source, cache_dir)
    rows = []
    for row in iter_jsonl(local):
        if num_rows is not None and len(rows) >= int(num_rows):
            break
        rows.append(row)
    write_jsonl(destination, rows)
    write_sidecar(destination, arguments, "download_data")
    print(f"download_data: {len(rows)} rows from {source} -> {destination}")
    return destination
