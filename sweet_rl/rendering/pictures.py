"""Which screenshot scores each frontend trajectory, and rendering the ones still missing.

A trajectory's final page is, in order of preference: the PNG named by ``answer_screenshot``
(simulate already rendered it), the PNG whose path the original code stored in ``answer``, a
PNG of the same HTML already in the screenshot folder (names are content hashes, so a page
rendered by an interrupted run is reused), or the ``answer`` HTML rendered now. The reference
page goes the same way with ``reference_screenshot`` and ``task.ground_truth``. Model-written
HTML only ever reaches the offline renderer.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Dict, List, Optional, Set

from sweet_rl.io import write_bytes
from sweet_rl.records import Trajectory
from sweet_rl.rendering.screenshots import resolve, screenshot_path

ANSWER_KEY = "answer_screenshot"
REFERENCE_KEY = "reference_screenshot"


@dataclass
class Picture:
    """One page to score. ``path`` None means no picture (scored black)."""

    path: Optional[str] = None
    html: Optional[str] = None  # still to be rendered into ``path``
    error: Optional[str] = None  # why there is no picture, when something went wrong
    new: bool = False  # found or rendered here: its stored path goes back into the row

    @property
    def pending(self) -> bool:
        return self.html is not None


def _existing(stored, jsonl_path: str) -> Optional[str]:
    path = resolve(stored, jsonl_path) if isinstance(stored, str) else None
    return path if path and os.path.isfile(path) else None


def _png_path_in_answer(answer: str) -> Optional[str]:
    """The original wrote the final screenshot's path as ``answer``; HTML never looks like one."""
    text = answer.strip()
    if not text.lower().endswith(".png") or len(text) > 4096 or any(c in text for c in "<>\n"):
        return None
    return text


def _from_html(html: str, directory: str, kind: str) -> Picture:
    path = screenshot_path(directory, html, kind)
    if os.path.isfile(path):
        return Picture(path=path, new=True)
    return Picture(path=path, html=html, new=True)


def answer_picture(traj: Trajectory, jsonl_path: str, directory: str) -> Picture:
    found = _existing(traj.extra.get(ANSWER_KEY), jsonl_path)
    if found:
        return Picture(path=found)
    old = _png_path_in_answer(traj.answer)
    if old is not None:
        path = resolve(old, jsonl_path)
        if os.path.isfile(path):
            return Picture(path=path)
        return Picture(error=f"answer screenshot {old} not found")
    if not traj.answer.strip():
        return Picture()  # the agent never showed a page: black, as in the original
    return _from_html(traj.answer, directory, "page")


def reference_picture(traj: Trajectory, jsonl_path: str, directory: str) -> Picture:
    found = _existing(traj.extra.get(REFERENCE_KEY), jsonl_path)
    if found:
        return Picture(path=found)
    return _from_html(traj.task.ground_truth, directory, "reference")


def picture_key(path: Optional[str]) -> str:
    """Identity of a picture by content (``black`` for none): equal files are one picture."""
    if path is None:
        return "black"
    with open(path, "rb") as handle:
        return hashlib.sha1(handle.read()).hexdigest()


def drop_unreadable(pictures: List[Picture]) -> None:
    """A picture file PIL cannot read (a damaged or foreign file) counts as missing, with why."""
    from PIL import Image, UnidentifiedImageError

    for picture in pictures:
        if picture.path is None:
            continue
        try:
            with Image.open(picture.path) as image:
                image.verify()  # checks the file's structure without decoding every pixel
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as err:
            picture.error = f"unreadable screenshot {picture.path} ({type(err).__name__})"
            picture.path, picture.new = None, False


def render_pending(
    pictures: List[Picture],
    browser: str = "chromium",
    pool_size: Optional[int] = None,
    assets_dir: Optional[str] = None,
    page_load_timeout: float = 20.0,
) -> Dict[str, object]:
    """Render every distinct pending page once, concurrently; fill in ``path`` or ``error``.

    One render serves every file of the same HTML (an answer that is its reference's page gets
    the reference's very picture, whatever a second render might have drawn differently).
    Returns ``{"rendered": n, "failed": n, "browsers": set of "name version"}``, counted in
    files.
    """
    from tqdm import tqdm

    from sweet_rl.rendering import assets as page_assets
    from sweet_rl.rendering.pool import DriverPool

    jobs: Dict[str, str] = {}  # target path -> html (one render per distinct page and kind)
    for picture in pictures:
        if picture.pending:
            jobs.setdefault(picture.path, picture.html)
    outcome: Dict[str, Optional[str]] = {}  # target path -> None (saved) or the error
    browsers: Set[str] = set()
    if jobs:
        try:
            pool = DriverPool(size=pool_size, browser=browser, assets_dir=assets_dir,
                              page_load_timeout=page_load_timeout)
        except page_assets.AssetsMissing as err:
            raise ValueError(str(err)) from None  # a set-up step is missing: one clear line
        targets: Dict[str, List[str]] = {}  # html -> every file it is drawn into
        for target, html in jobs.items():
            targets.setdefault(html, []).append(target)
        with pool, ThreadPoolExecutor(max_workers=pool.size) as executor:
            futures = {executor.submit(pool.render, html): paths
                       for html, paths in targets.items()}
            for future in tqdm(
                as_completed(futures), total=len(futures), desc="render", unit="page"
            ):
                paths, result = futures[future], future.result()
                browsers.add(result.browser)
                error = None if result.ok else (result.error or "render failed")
                for target in paths:
                    if error is None:
                        write_bytes(target, result.png)  # a killed run leaves no half PNG
                    outcome[target] = error
    for picture in pictures:
        if picture.pending:
            error = outcome[picture.path]
            if error is not None:
                picture.path, picture.new, picture.error = None, False, f"render failed: {error}"
            picture.html = None
    failed = sum(error is not None for error in outcome.values())
    return {"rendered": len(jobs) - failed, "failed": failed, "browsers": browsers}
