"""Pages per second: a reused DriverPool against one new browser per page.

Renders the same real reference pages of frontend_test.jsonl both ways in one
run and prints both rates and their ratio.  Needs the asset cache
(`python -m sweet_rl.rendering.assets`) and Chromium + chromedriver.

    python benchmarks/bench_renderer.py [--pages 50] [--size N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweet_rl.rendering.pool import default_pool_size, DriverPool  # noqa: E402


def load_pages(n: int):
    path = ROOT.parent / "shared" / "colbench" / "frontend_test.jsonl"
    pages = []
    with open(path) as fh:
        for line in fh:
            pages.append(json.loads(line)["ground_truth"])
            if len(pages) == n:
                break
    return pages


def fresh_browser_each(pages, workers, assets_dir):
    """Same parallelism, but a new browser is started (and closed) for every page."""

    def one(html):
        with DriverPool(size=1, assets_dir=assets_dir) as p:
            return p.render(html)

    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(one, pages))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--size", type=int, default=None, help="pool size (default: min(cpus, 4))")
    ap.add_argument("--assets-dir", default=None)
    args = ap.parse_args(argv)
    pages = load_pages(args.pages)
    size = args.size or default_pool_size()

    with DriverPool(size=size, assets_dir=args.assets_dir) as pool:
        pool.render_many(pages[:size])  # warm up: start the browsers
        t = time.perf_counter()
        pooled = pool.render_many(pages)
        pooled_s = time.perf_counter() - t
        browser = pooled[0].browser

    t = time.perf_counter()
    fresh = fresh_browser_each(pages, size, args.assets_dir)
    fresh_s = time.perf_counter() - t

    ok_p = sum(r.ok for r in pooled)
    ok_f = sum(r.ok for r in fresh)
    rate_p = len(pages) / pooled_s
    rate_f = len(pages) / fresh_s
    print(f"browser: {browser}; pages: {len(pages)}; workers: {size}")
    print(f"pool (reused browsers): {rate_p:.2f} pages/s ({pooled_s:.1f} s, {ok_p} ok)")
    print(f"new browser per page:   {rate_f:.2f} pages/s ({fresh_s:.1f} s, {ok_f} ok)")
    print(f"speed-up: {rate_p / rate_f:.1f}x")
    return 0 if ok_p == len(pages) and ok_f == len(pages) else 1


if __name__ == "__main__":
    sys.exit(main())
