"""A fixed number of reusable, sandboxed browsers behind one local page server.

    with DriverPool() as pool:
        result = pool.render(html)
        if result.ok:
            result.save("page.png")
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterable, List, Optional

from sweet_rl.rendering import assets as page_assets
from sweet_rl.rendering.browser import (
    DEFAULT_PAGE_LOAD_TIMEOUT,
    DEFAULT_SCRIPT_TIMEOUT,
    MAX_HEIGHT,
    BrowserSession,
)
from sweet_rl.rendering.processes import kill_all, pids_with
from sweet_rl.rendering.result import RenderResult
from sweet_rl.rendering.page_server import PageServer


# --------------------------------------------------------------------------
# Pool
# --------------------------------------------------------------------------


def default_pool_size() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


class DriverPool:
    """A fixed number of reusable browsers behind one local page server.

    Thread-safe: ``render`` may be called from many threads; at most ``size``
    pages render at once.  Browsers start lazily, are reused across pages,
    and are replaced after a failure.  Use as a context manager, or call
    ``close()``; it stops every browser it started.
    """

    def __init__(
        self,
        size: Optional[int] = None,
        browser: str = "chromium",
        page_load_timeout: float = DEFAULT_PAGE_LOAD_TIMEOUT,
        script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
        max_height: int = MAX_HEIGHT,
        assets_dir: Optional[str] = None,
        require_tailwind: bool = True,
    ):
        self.size = size or default_pool_size()
        self.browser = browser
        self._session_args = dict(
            browser=browser,
            page_load_timeout=page_load_timeout,
            script_timeout=script_timeout,
            max_height=max_height,
        )
        try:
            css = page_assets.tailwind_path(assets_dir)
        except page_assets.AssetsMissing:
            if require_tailwind:
                raise
            css = None
        self.server = PageServer(css)
        self._idle: "queue.LifoQueue[Optional[BrowserSession]]" = queue.LifoQueue()
        for _ in range(self.size):
            self._idle.put(None)  # a free slot, browser not started yet
        self._lock = threading.Lock()
        self._live: Dict[int, BrowserSession] = {}
        self.profile_dirs: List[str] = []  # every profile ever used (for leak checks)
        self.restarts = 0
        self._closed = False

    # -- sessions ---------------------------------------------------------
    def _new_session(self) -> BrowserSession:
        s = BrowserSession(self.server, **self._session_args)
        with self._lock:
            if self._closed:
                s.close()
                raise RuntimeError("pool is closed")
            self._live[s.id] = s
            self.profile_dirs.append(s.profile_dir)
        return s

    def _retire(self, s: BrowserSession) -> None:
        with self._lock:
            self._live.pop(s.id, None)
            self.restarts += 1
        s.close(grace=2.0)

    def render(self, html: str) -> RenderResult:
        if self._closed:
            raise RuntimeError("pool is closed")
        slot = self._idle.get()
        try:
            for attempt in range(2):
                if slot is not None and (slot.broken or not slot.alive()):
                    self._retire(slot)
                    slot = None
                if slot is None:
                    try:
                        slot = self._new_session()
                    except Exception as exc:
                        return RenderResult(False, None, 0, 0, self.browser,
                                            f"browser did not start: {type(exc).__name__}: {exc}")
                fresh = slot.pages_rendered == 0
                result = slot.render(html)
                # Retry once only when a browser that had worked before died
                # under us (crash), not when the page itself timed out.
                crashed = (not result.ok and not slot.killed and not slot.processes_alive()
                           and "imeout" not in (result.error or ""))
                if result.ok or fresh or not crashed or attempt == 1:
                    return result
            return result
        finally:
            if slot is not None and slot.broken:
                self._retire(slot)
                slot = None
            self._idle.put(slot)

    def render_many(self, pages: Iterable[str]) -> List[RenderResult]:
        pages = list(pages)
        with ThreadPoolExecutor(max_workers=self.size) as ex:
            return list(ex.map(self.render, pages))

    @property
    def sessions(self) -> List[BrowserSession]:
        with self._lock:
            return list(self._live.values())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live.values())
            self._live.clear()
        threads = [threading.Thread(target=s.close, daemon=True) for s in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        for d in self.profile_dirs:  # belt and braces
            kill_all(pids_with(d))
        self.server.close()

    def __enter__(self) -> "DriverPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


def open_renderer(browser: str = "chromium", size: Optional[int] = None):
    """A started browser pool and the browser's name and version (for the sidecar).

    One blank page is rendered first, so a missing browser or Tailwind cache stops the run
    with one clear line before any model is loaded.
    """
    try:
        pool = DriverPool(size=size, browser=browser)
    except page_assets.AssetsMissing as err:
        raise FileNotFoundError(str(err)) from err
    probe = pool.render("<html><body></body></html>")
    if not probe.ok:
        pool.close()
        raise FileNotFoundError(f"cannot render pages with {browser}: {probe.error} (install "
                                "chromium and chromedriver, or geckodriver for --browser firefox)")
    return pool, probe.browser
