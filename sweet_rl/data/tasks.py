"""Loading ColBench tasks from a local JSONL, the bundled samples, or the Hugging Face hub.

Hub paths look like ``hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl``
(dataset repo id, then the file inside it). The file is fetched with ``hf_hub_download``, so the
usual cache, ``HF_HOME``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` settings apply.
"""

from __future__ import annotations

import logging
import os
from typing import List, Optional, Tuple

from sweet_rl.io import read_jsonl
from sweet_rl.records import Task

logger = logging.getLogger(__name__)

_HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_BACKEND_TASKS = os.path.join(_HERE, "sample_backend_tasks.jsonl")
SAMPLE_FRONTEND_TASKS = os.path.join(_HERE, "sample_frontend_tasks.jsonl")
# The bundled demo tasks for each task_type (our own small tasks, not ColBench's).
SAMPLE_TASKS = {"code": SAMPLE_BACKEND_TASKS, "html": SAMPLE_FRONTEND_TASKS}
COLBENCH_REPO = "facebook/collaborative_agent_bench"
HUB_PREFIX = "hf://"


def parse_hub_path(path: str) -> Tuple[str, str]:
    """``hf://owner/name/sub/file.jsonl`` -> (``owner/name``, ``sub/file.jsonl``)."""
    rest = path[len(HUB_PREFIX):]
    parts = rest.split("/")
    if len(parts) < 3:
        raise ValueError(f"hub path must be hf://OWNER/DATASET/FILE, got {path!r}")
    return "/".join(parts[:2]), "/".join(parts[2:])


def sample_tasks_path(task_type: str = "code") -> str:
    if task_type not in SAMPLE_TASKS:
        raise ValueError(f"no bundled sample tasks for task_type {task_type!r}; "
                         f"choose from {sorted(SAMPLE_TASKS)} or pass --input_path")
    return SAMPLE_TASKS[task_type]


def resolve_input_path(path: Optional[str], cache_dir: Optional[str] = None,
                       task_type: str = "code") -> str:
    """A local file path for ``path``: bundled samples (of ``task_type``), a hub file
    (downloaded), or as given."""
    if path in (None, "", "sample", "samples"):
        return sample_tasks_path(task_type)
    if path.startswith(HUB_PREFIX):
        from huggingface_hub import hf_hub_download

        repo_id, filename = parse_hub_path(path)
        try:
            return hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset",
                                   cache_dir=cache_dir)
        except Exception as err:  # offline, unknown repo or file, refused token: one line
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise OSError(f"cannot download {filename} from the hub dataset {repo_id} "
                          f"({type(err).__name__}: {reason}); pass a local --input_path, or "
                          "check the name, the network and HF_TOKEN") from None
    return path


def load_tasks(path: Optional[str], num_tasks: Optional[int] = None,
               cache_dir: Optional[str] = None, task_type: str = "code") -> List[Task]:
    """The first ``num_tasks`` tasks (all when None) with line-numbered errors on bad rows;
    without ``path``, the bundled samples of ``task_type``. A negative count is refused (a
    slice would silently drop tasks from the end); a count above what the file holds is
    logged, and ``len()`` of the result is the number actually used."""
    if num_tasks is not None and (isinstance(num_tasks, bool) or int(num_tasks) < 1):
        raise ValueError(f"--num_tasks must be a positive number of tasks (or None for all), "
                         f"got {num_tasks!r}")
    local = resolve_input_path(path, cache_dir, task_type)
    tasks = read_jsonl(local, Task.from_dict)
    if num_tasks is not None:
        if int(num_tasks) > len(tasks):
            logger.warning("--num_tasks %s: %s holds only %d tasks; using all %d", num_tasks,
                           local, len(tasks), len(tasks))
        tasks = tasks[: int(num_tasks)]
    if not tasks:
        raise ValueError(f"{local}: no tasks found")
    return tasks
