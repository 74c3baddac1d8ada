"""Rendering many pages and judging the shots: a checked browser pool, renders in order, and
why a page is unusable (it failed, or it is blank). filter_websites drops tasks with these;
the design viewer renders the pages that have no screenshot with them."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, List, Optional

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
