"""Render a page once and keep its screenshot in a content-named file.

The file name is the hash of the HTML (:func:`sweet_rl.rendering.screenshots.screenshot_path`),
so the folder itself is the cache: the reference page shared by the k rollouts of a task, a page
two agents both wrote, and every page of a resumed run are rendered once. A lock per file keeps
two threads from rendering the same page at the same time, and a page that failed to render is
remembered (per file, for this process) so that k rollouts of a task whose reference hangs do
not each wait out the browser's timeout.

Model-written HTML only ever goes to the renderer (a sandboxed browser pool); this module
handles the PNG bytes the renderer returns.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Dict, Optional

from sweet_rl.io import write_bytes
from sweet_rl.rendering.screenshots import screenshot_path

_guard = threading.Lock()
_locks: Dict[str, threading.Lock] = {}
_failures: Dict[str, str] = {}


@dataclass(frozen=True)
class Shot:
    """Where the page's PNG is (None when it failed) and why it failed."""

    path: Optional[str]
    error: Optional[str] = None
    rendered: bool = False  # False: the file was already there (or the failure remembered)
    browser: Optional[str] = None  # name + version, when this call rendered the page


def _lock_for(path: str) -> threading.Lock:
    with _guard:
        return _locks.setdefault(path, threading.Lock())


def shoot(renderer, html: str, directory: str, kind: str = "page") -> Shot:
    """The screenshot of ``html`` under ``directory``, rendering it only when needed.

    ``renderer`` has ``render(html) -> RenderResult`` (a :class:`DriverPool`).
    """
    path = os.path.abspath(screenshot_path(directory, html, kind))
    with _lock_for(path):
        if os.path.exists(path):
            return Shot(path)
        if path in _failures:
            return Shot(None, error=_failures[path])
        result = renderer.render(html)
        if not result.ok or result.png is None:
            error = result.error or "the renderer returned no image"
            _failures[path] = error
            return Shot(None, error=error, rendered=True, browser=result.browser)
        write_bytes(path, result.png)  # a resumed run never sees half a PNG
        return Shot(path, rendered=True, browser=result.browser)


def read_png(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()
