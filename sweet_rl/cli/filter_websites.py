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

import io
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, List, Optional

logger = logging.getLogger(__name__)

PROBE_PAGE = "<html><body><p>probe</p></body></html>"


def is_blank_png(png: bytes) -> bool:
    """True when every pixel of the PNG has the same colour (alpha included)."""
    try:
        from PIL import Image
    except ImportError:  # the slower pure-Python decoder gives the same answer
        from sweet_rl.rendering.assets import decode_png

        _, _, channels, rows = decode_png(png)
        first = bytes(rows[0][:channels]) if rows else b""
        return all(bytes(row) == first * (len(row) // channels) for row in rows)
    with Image.open(io.BytesIO(png)) as image:
        extrema = image.getextrema()
    if isinstance(extrema[0], (int, float)):  # one band: a single (min, max) pair
        extrema = (extrema,)
    return all(low == high for low, high in extrema)


def drop_reason(result) -> Optional[str]:
    """Why a render result disqualifies its page (``None``: keep it)."""
    if not result.ok or result.png is None:
        return f"failed: {result.error or 'no screenshot'}"
    if is_blank_png(result.png):
        return "blank: the screenshot is a single colour"
    return None


def render_in_order(pool, pages: Iterable[str], desc: str = "pages") -> List:
    """``pool.render`` on every page, ``pool.size`` at a time, with a progress bar; results in
    the order of ``pages``."""
    from tqdm import tqdm

    pages = list(pages)
    results = []
    with ThreadPoolExecutor(max_workers=pool.size) as executor, \
            tqdm(total=len(pages), desc=desc, unit="page") as bar:
        for result in executor.map(pool.render, pages):
            results.append(result)
            bar.update(1)
    return results


def open_pool(pool_size: Optional[int] = None, browser: str = "chromium",
              page_load_timeout: float = 20.0, script_timeout: float = 5.0,
              max_height: int = 8000, assets_dir: Optional[str] = None):
    """A :class:`DriverPool` whose browser is known to work: a probe page renders first, so a
    missing browser stops the stage with one clear error instead of dropping every page."""
    from sweet_rl.rendering.assets import AssetsMissing
    from sweet_rl.rendering.pool import DriverPool

    try:
        pool = DriverPool(size=pool_size, browser=browser, page_load_timeout=page_load_timeout,
                          script_timeout=script_timeout, max_height=max_height,
                          assets_dir=assets_dir)
    except AssetsMissing as err:
        raise FileNotFoundError(str(err)) from None
    probe = pool.render(PROBE_PAGE)
    if not probe.ok:
        pool.close()
        raise RuntimeError(f"the {browser} renderer does not work here: {probe.error}")
    return pool, probe.browser


def main(input_path: Optional[str] = None, output_path: Optional[str] = None,
         temp_path: Optional[str] = None, screenshot_dir: Optional[str] = None,
         pool_size: Optional[int] = None, browser: str = "chromium",
         page_load_timeout: float = 20.0, script_timeout: float = 5.0, max_height: int = 8000,
         assets_dir: Optional[str] = None, overwrite: bool = False,
         saved_path: Optional[str] = None, filtered_path: Optional[str] = None,
         train: Optional[bool] = None):
    """Write to OUTPUT_PATH the tasks of INPUT_PATH whose reference page renders.

    Example:
        python scripts/filter_websites.py data/frontend_tasks/train.jsonl \\
            data/frontend_tasks/train_filtered.jsonl --screenshot_dir data/frontend_tasks/shots

    Args:
        input_path: frontend task JSONL (``problem_description``, ``ground_truth`` HTML).
        output_path: the kept tasks, in input order (with a .config.json sidecar).
        temp_path: the original code's scratch folder for screenshots; pages render in memory
            here, so it is not used (a notice says so).
        screenshot_dir: also save each kept reference screenshot there, named
            ``reference_<hash of the HTML>.png`` (see ``sweet_rl.rendering.screenshots``).
        pool_size: browsers rendering at once (default: up to 4, one per core).
        browser: ``chromium`` or ``firefox``.
        page_load_timeout: seconds a page may take to load before it counts as failed.
        script_timeout: seconds the in-page height measurement may take before the page
            counts as failed.
        max_height: screenshots are clipped to this many pixels.
        assets_dir: the offline Tailwind cache (default: $SWEET_RL_ASSETS or ~/.cache).
        overwrite: replace an existing output.
        saved_path: the original code's name for input_path.
        filtered_path: the original code's name for output_path.
        train: accepted for the original's command lines; it had no effect there either.
    """
    arguments = dict(locals())
    from sweet_rl.cli.common import merge_alias, notice_once

    input_path = merge_alias(input_path, saved_path, "input_path", "saved_path")
    output_path = merge_alias(output_path, filtered_path, "output_path", "filtered_path")
    if input_path is None or output_path is None:
        missing = (
            "input_path (or --saved_path)"
            if input_path is None
            else "output_path (or --filtered_path)"
        )
        raise ValueError(f"--{missing} is required: filter_websites.py INPUT.jsonl OUTPUT.jsonl")
    if temp_path is not None:
        notice_once(
            "--temp_path not used: pages render in memory (see --screenshot_dir to keep them)"
        )
    if train is not None:
        notice_once("--train has no effect on filtering (it had none in the original code)")
    # the sidecar records the merged paths under our names
    arguments.update(input_path=input_path, output_path=output_path)
    arguments.pop("saved_path"), arguments.pop("filtered_path")
    from sweet_rl.io import read_jsonl, write_jsonl, write_sidecar
    from sweet_rl.records import Task
    from sweet_rl.rendering.screenshots import screenshot_path

    if os.path.abspath(input_path) == os.path.abspath(output_path):
        raise ValueError(f"output path {output_path} is the input file; refusing to overwrite it")
    tasks = read_jsonl(input_path, Task.from_dict)  # validates first; names file, line, field
    if os.path.exists(output_path) and not overwrite:
        raise FileExistsError(f"{output_path} exists: pass --overwrite to replace it")
    started = time.time()
    pages = list(dict.fromkeys(task.ground_truth for task in tasks))  # each distinct page once
    try:
        pool, browser_name = open_pool(pool_size, browser, page_load_timeout, script_timeout,
                                       max_height, assets_dir)
    except RuntimeError as err:  # no browser here: one line and a non-zero exit, no output
        raise SystemExit(f"error: {err}") from None
    try:
        results = dict(zip(pages, render_in_order(pool, pages, desc="reference pages")))
    finally:
        pool.close()

    kept, failed, blank, saved = [], 0, 0, set()
    for number, task in enumerate(tasks, start=1):
        result = results[task.ground_truth]
        reason = drop_reason(result)
        if reason is None:
            kept.append(task)
            if screenshot_dir and task.ground_truth not in saved:  # content-named: once each
                os.makedirs(screenshot_dir, exist_ok=True)
                result.save(screenshot_path(screenshot_dir, task.ground_truth, "reference"))
                saved.add(task.ground_truth)
            continue
        failed += reason.startswith("failed")
        blank += reason.startswith("blank")
        logger.info("dropped task on line %d of %s: %s", number, input_path, reason)
    write_jsonl(output_path, kept)
    arguments["browser_version"] = browser_name
    write_sidecar(output_path, arguments, "filter_websites")
    print(f"filter_websites: kept {len(kept)} of {len(tasks)} tasks (dropped {failed} failed, "
          f"{blank} blank; {len(pages)} distinct pages) with {browser_name} in "
          f"{time.time() - started:.1f}s -> {output_path}")
