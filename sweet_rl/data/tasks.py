"""Loading ColBench tasks from a local JSONL, the bundled samples, or the Hugging Face hub.

Hub paths look like ``hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl``
(dataset repo id, then the file inside it). The file is fetched with ``hf_hub_download``, so the
usual cache, ``HF_HOME``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` settings apply.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from sweet_rl.io import read_jsonl
from sweet_rl.records import Task

SAMPLE_BACKEND_TASKS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "sample_backend_tasks.jsonl")
COLBENCH_REPO = "facebook/collaborative_agent_bench"
HUB_PREFIX = "hf://"


def parse_hub_path(path: str) -> Tuple[str, str]:
    """``hf://owner/name/sub/file.jsonl`` -> (``owner/name``, ``sub/file.jsonl``)."""
    rest = path[len(HUB_PREFIX):]
    parts = rest.split("/")
    if len(parts) < 3:
        raise ValueError(f"hub path must be hf://OWNER/DATASET/FILE, got {path!r}")
    return "/".join(parts[:2]), "/".join(parts[2:])


def resolve_input_path(path: Optional[str], cache_dir: Optional[str] = None) -> str:
    """A local file path for ``path``: bundled samples, a hub file (downloaded), or as given."""
    if path in (None, "", "sample", "samples"):
        return SAMPLE_BACKEND_TASKS
    if path.startswith(HUB_PREFIX):
        from huggingface_hub import hf_hub_download

        repo_id, filename = parse_hub_path(path)
        return hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset",
                               cache_dir=cache_dir)
    return path


def load_tasks(path: Optional[str], num_tasks: Optional[int] = None,
               cache_dir: Optional[str] = None) -> List[Task]:
    """The first ``num_tasks`` tasks (all when None) with line-numbered errors on bad rows."""
    local = resolve_input_path(path, cache_dir)
    tasks = read_jsonl(local, Task.from_dict)
    if num_tasks is not None:
        tasks = tasks[: int(num_tasks)]
    if not tasks:
        raise ValueError(f"{local}: no tasks found")
    return tasks
