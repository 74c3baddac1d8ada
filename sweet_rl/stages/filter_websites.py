"""Stage: keep the frontend tasks whose reference page renders.

Every distinct ``ground_truth`` page is rendered once by the offline renderer (a pool of
headless browsers, concurrently). A task is dropped when its page

* fails: the browser errors, the page does not load within ``--page_load_timeout``, or the
  watchdog kills a page whose script never ends; or
* renders blank: every pixel of the screenshot has the same colour (nothing visible drawn).

The kept tasks are written in input order, atomically, only once every page is done (the
stage is not resumable: a killed run writes nothing and is simply run again).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import flag
from sweet_rl.stages.groups import RenderOptions

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class FilterOptions(RenderOptions):
    """Write to OUTPUT_PATH the tasks of INPUT_PATH whose reference page renders.

    Example:
        python scripts/filter_websites.py data/frontend_tasks/train.jsonl \\
            data/frontend_tasks/train_filtered.jsonl --screenshot_dir data/frontend_tasks/shots
    """

    POSITIONAL = ("input_path", "output_path", "temp_path")
    input_path: str = flag(
        "frontend task JSONL (``problem_description``, ``ground_truth`` HTML).",
        aliases=("saved_path",))
    output_path: str = flag(
        "the kept tasks, in input order (with a .config.json sidecar).",
        aliases=("filtered_path",))
    temp_path: Optional[str] = flag(
        "the original code's scratch folder for screenshots; pages render in memory here, so "
        "it is not used (a notice says so).", None)
    screenshot_dir: Optional[str] = flag(
        "also save each kept reference screenshot there, named ``reference_<hash of the "
        "HTML>.png`` (see ``sweet_rl.rendering.screenshots``).", None)
    script_timeout: float = flag(
        "seconds the in-page height measurement may take before the page counts as failed.",
        5.0)
    max_height: int = flag("screenshots are clipped to this many pixels.", 8000)
    overwrite: bool = flag("replace an existing output.", False)
    train: Optional[bool] = flag(
        "accepted for the original's command lines; it had no effect there either.", None)


def filter_websites(opts: FilterOptions) -> str:
    """Render every distinct reference page, keep the tasks whose page is usable, print one
    line; returns the output path."""
    from sweet_rl.io import read_jsonl, write_jsonl, write_sidecar
    from sweet_rl.notices import notice_once
    from sweet_rl.records import Task
    from sweet_rl.rendering.page_checks import open_pool, render_in_order

    if opts.temp_path is not None:
        notice_once("--temp_path not used: pages render in memory (see --screenshot_dir to keep "
                    "them)")
    if opts.train is not None:
        notice_once("--train has no effect on filtering (it had none in the original code)")
    if os.path.abspath(opts.input_path) == os.path.abspath(opts.output_path):
        raise ValueError(f"output path {opts.output_path} is the input file; refusing to "
                         "overwrite it")
    tasks = read_jsonl(opts.input_path, Task.from_dict)  # validates first; names file/line/field
    if os.path.exists(opts.output_path) and not opts.overwrite:
        raise FileExistsError(f"{opts.output_path} exists: pass --overwrite to replace it")
    started = time.time()
    pages = list(dict.fromkeys(task.ground_truth for task in tasks))  # each distinct page once
    try:
        pool, browser_name = open_pool(opts.pool_size, opts.browser, opts.page_load_timeout,
                                       opts.script_timeout, opts.max_height, opts.assets_dir)
    except RuntimeError as err:  # no browser here: one line and a non-zero exit, no output
        raise SystemExit(f"error: {err}") from None
    try:
        results = dict(zip(pages, render_in_order(pool, pages, desc="reference pages")))
    finally:
        pool.close()
    kept, failed, blank = _keep(opts, tasks, results)
    write_jsonl(opts.output_path, kept)
    write_sidecar(opts.output_path, dict(opts.flags(), browser_version=browser_name),
                  "filter_websites")
    print(f"filter_websites: kept {len(kept)} of {len(tasks)} tasks (dropped {failed} failed, "
          f"{blank} blank; {len(pages)} distinct pages) with {browser_name} in "
          f"{time.time() - started:.1f}s -> {opts.output_path}")
    return opts.output_path


def _keep(opts: FilterOptions, tasks, results):
    """``(kept tasks, failed, blank)``; kept reference screenshots saved when asked."""
    from sweet_rl.rendering.page_checks import drop_reason
    from sweet_rl.rendering.screenshots import screenshot_path

    kept, failed, blank, saved = [], 0, 0, set()
    for number, task in enumerate(tasks, start=1):
        result = results[task.ground_truth]
        reason = drop_reason(result)
        if reason is None:
            kept.append(task)
            if opts.screenshot_dir and task.ground_truth not in saved:  # content-named: once
                os.makedirs(opts.screenshot_dir, exist_ok=True)
                result.save(screenshot_path(opts.screenshot_dir, task.ground_truth, "reference"))
                saved.add(task.ground_truth)
            continue
        failed += reason.startswith("failed")
        blank += reason.startswith("blank")
        logger.info("dropped task on line %d of %s: %s", number, opts.input_path, reason)
    return kept, failed, blank
