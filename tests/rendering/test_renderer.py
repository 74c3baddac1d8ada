"""The offline HTML renderer against a real headless Chromium."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from sweet_rl.rendering import assets as page_assets
from sweet_rl.rendering.browser import MAX_HEIGHT, VIEWPORT_WIDTH
from sweet_rl.rendering.page_server import rewrite_html
from sweet_rl.rendering.pool import DriverPool
from sweet_rl.rendering.processes import find_binary, kill_all, pids_with

pytestmark = pytest.mark.slow  # real Chromium

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "colbench"
GREEN_500 = (0x10, 0xB9, 0x81)

CDN = "https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css"


# ---------------------------------------------------------------- pure parts


def test_placeholder_png_size_and_determinism():
    a = page_assets.placeholder_png(300, 200)
    assert a == page_assets.placeholder_png(300, 200)
    assert page_assets.png_size(a) == (300, 200)
    w, h, ch, rows = page_assets.decode_png(a)
    assert (w, h, len(rows)) == (300, 200, 200)
    assert page_assets.png_size(page_assets.placeholder_png(0, 10**7)) == (1, page_assets.MAX_SIDE)


def test_rewrite_html_points_assets_at_local_server():
    html = (
        f'<link href="{CDN}" rel="stylesheet">'
        '<img src="https://picsum.photos/id/48/640/480">'
        "<img src='https://picsum.photos/200/300?random=1'>"
        '<div style="background:url(https://source.unsplash.com/random/800x600/?nature)"></div>'
        '<img src="https://example.com/a.png">'
    )
    out = rewrite_html(html, "http://127.0.0.1:9")
    assert 'href="http://127.0.0.1:9/assets/tailwind.min.css"' in out
    assert 'src="http://127.0.0.1:9/img/640/480.png"' in out
    assert "src='http://127.0.0.1:9/img/200/300.png'" in out
    assert "url(http://127.0.0.1:9/img/800/600.png)" in out
    assert "https://example.com/a.png" in out  # left alone; the browser blocks it


def test_tailwind_path_missing_says_how_to_fill(tmp_path):
    with pytest.raises(page_assets.AssetsMissing, match="python -m sweet_rl.rendering.assets"):
        page_assets.tailwind_path(str(tmp_path / "empty"))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def assets_dir(tmp_path_factory):
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: cannot fill the Tailwind asset cache")
    cache = tmp_path_factory.mktemp("assets")
    try:
        path = page_assets.fetch_tailwind(str(cache), timeout=120)
    except Exception as exc:  # registry unreachable, npm broken, ...
        pytest.skip(f"cannot fetch Tailwind with npm pack (registry unreachable?): {exc}")
    assert path.stat().st_size > 100_000
    # A second call uses the cache and does not run npm again.
    assert page_assets.fetch_tailwind(str(cache), npm="no-such-npm-binary") == path
    return str(cache)


@pytest.fixture(scope="session")
def chromium_ok():
    if find_binary("SWEET_RL_CHROMEDRIVER", ("/usr/bin/chromedriver",), "chromedriver") is None:
        pytest.skip("chromedriver not installed")
    if find_binary("SWEET_RL_CHROMIUM", ("/usr/bin/chromium",), "chromium") is None:
        pytest.skip("chromium not installed")


@pytest.fixture(scope="module")
def pool(assets_dir, chromium_ok):
    p = DriverPool(size=1, assets_dir=assets_dir)
    yield p
    p.close()


def reference_page() -> str:
    path = SHARED / "frontend_test.jsonl"
    if path.exists():
        with open(path) as fh:
            for line in fh:
                html = json.loads(line)["ground_truth"]
                if '<header class="bg-green-500' in html and "picsum.photos/id/" in html:
                    return html
    return (
        f'<html><link href="{CDN}" rel="stylesheet"><body>'
        '<header class="bg-green-500 text-white p-4"><h1 class="text-3xl">Hi</h1></header>'
        '<img src="https://picsum.photos/id/48/400/300"></body></html>'
    )


def pixel(png: bytes, x: int, y: int):
    w, h, ch, rows = page_assets.decode_png(png)
    return tuple(rows[y][x * ch : x * ch + 3])


# ---------------------------------------------------------------- rendering


def test_reference_page_renders_offline_with_tailwind(pool):
    html = reference_page()
    res = pool.render(html)
    assert res.ok, res.error
    assert res.width == VIEWPORT_WIDTH and res.height >= 100
    assert res.browser.startswith("chrome") and any(c.isdigit() for c in res.browser)
    # The header's right edge is Tailwind's green-500.
    r, g, b = pixel(res.png, VIEWPORT_WIDTH - 4, 6)
    assert max(abs(r - GREEN_500[0]), abs(g - GREEN_500[1]), abs(b - GREEN_500[2])) <= 3
    paths = [e["path"] for e in pool.server.log if not e["blocked"]]
    assert "/assets/tailwind.min.css" in paths
    import re

    sizes = re.findall(r"picsum\.photos/id/\d+/(\d+)/(\d+)", html)
    for w, h in sizes:
        assert f"/img/{w}/{h}.png" in paths
    if sizes:  # the placeholder is shown at its own size
        w, h = map(int, sizes[0])
        res2 = pool.render(
            f'<html><body style="margin:0"><img src="https://picsum.photos/id/48/{w}/{h}"></body></html>'
        )
        assert res2.ok, res2.error
        got = page_assets.decode_png(res2.png)[3]
        ref = page_assets.decode_png(page_assets.placeholder_png(w, h))[3]
        assert pixel(res2.png, 0, 0) == tuple(ref[0][0:3])
        assert pixel(res2.png, w + 2, 2) == (255, 255, 255)  # white page beside the image
        assert pixel(res2.png, 2, h + 2) == (255, 255, 255)
        assert len(got) >= h
        assert pixel(res2.png, w - 1, h - 1) == tuple(ref[h - 1][(w - 1) * 3 : w * 3])
        assert pixel(res2.png, w // 2, h // 2) == tuple(
            ref[h // 2][(w // 2) * 3 : (w // 2) * 3 + 3]
        )


def test_no_request_leaves_the_machine(pool):
    before = len(pool.server.log)
    reported = threading.Event()
    outcome = {}

    def report(handler):
        outcome["query"] = handler.path.split("?", 1)[-1]
        handler.send_response(204)
        handler.end_headers()
        reported.set()

    pool.server.routes["/report"] = report
    html = """<html><body>
      <img src="http://blocked-host.invalid/x.png"><img src="https://images.example.invalid/y.png">
      <script>
        fetch('https://api.example.invalid/').then(
          function(){ new Image().src = '/report?fetch=succeeded'; },
          function(){ new Image().src = '/report?fetch=failed'; });
      </script></body></html>"""
    res = pool.render(html)
    assert res.ok, res.error
    assert reported.wait(10), "the page never reported its fetch outcome"
    assert outcome["query"] == "fetch=failed"
    for entry in pool.server.log[before:]:
        assert entry["client"] == "127.0.0.1"
        if not entry["blocked"]:
            assert (
                entry["path"].startswith("/") and entry["host"] == f"127.0.0.1:{pool.server.port}"
            )
        else:
            assert entry["status"] == 403  # refused by the local proxy, never forwarded


@pytest.mark.slow(about=30)
def test_hostile_pages_are_bounded(assets_dir, chromium_ok):
    release = threading.Event()

    def hang(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "image/png")
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        release.wait(60)

    normal = (f'<html><link href="{CDN}" rel="stylesheet"><body>'
              '<header class="bg-green-500 p-4">ok</header></body></html>')
    with DriverPool(size=1, assets_dir=assets_dir, page_load_timeout=3, script_timeout=2) as p:
        p.server.routes["/hang.png"] = hang
        try:
            cases = {
                "loop": ("<html><body><script>while(true){}</script></body></html>", False, 12),
                "loop after load": (
                    "<body onload='setTimeout(function(){while(true){}},0)'>x</body>",
                    False,
                    20,
                ),
                "endless load": ('<html><body><img src="/hang.png">x</body></html>', False, 15),
                "tall": (
                    ('<html><body style="margin:0"><div style="height:100000px;background:#123456">'
                     '</div></body></html>'),
                    True,
                    15,
                ),
                "alert": (
                    ("<html><body><script>alert('hi'); confirm('x');</script>"
                     "<p>after</p></body></html>"),
                    True,
                    10,
                ),
            }
            for name, (html, ok, bound) in cases.items():
                t0 = time.monotonic()
                res = p.render(html)
                took = time.monotonic() - t0
                assert res.ok is ok, (name, res.error)
                assert took < bound, (name, took)
                if not ok:
                    assert res.error
                nxt = p.render(normal)
                assert nxt.ok, (name, nxt.error)
                assert pixel(nxt.png, 5, 5)[1] > 150
                if name == "tall":
                    assert res.height == MAX_HEIGHT and res.page_height >= 100000
                    assert pixel(res.png, 10, MAX_HEIGHT - 1) == (0x12, 0x34, 0x56)
        finally:
            release.set()


def test_pool_reuses_drivers_and_closes_them(assets_dir, chromium_ok):
    p = DriverPool(size=1, assets_dir=assets_dir)
    try:
        a = p.render("<html><body>one</body></html>")
        b = p.render("<html><body>two</body></html>")
        assert a.ok and b.ok
        assert a.session_id == b.session_id
        # A crashed browser is replaced on the next page.
        (session,) = p.sessions
        kill_all(pids_with(session.profile_dir))  # the browser dies; chromedriver lives on
        c = p.render("<html><body>three</body></html>")
        assert c.ok, c.error
        assert c.session_id != a.session_id
        dirs = list(p.profile_dirs)
        assert len(dirs) == 2
    finally:
        p.close()
    assert dirs and all(pids_with(d) == [] for d in dirs)
    assert all(not Path(d).exists() for d in dirs)


def test_firefox_renders(assets_dir):
    if shutil.which("geckodriver") is None or shutil.which("firefox") is None:
        pytest.skip("geckodriver/firefox not installed")
    with DriverPool(size=1, browser="firefox", assets_dir=assets_dir) as p:
        res = p.render(reference_page())
        assert res.ok, res.error
        assert res.width == VIEWPORT_WIDTH and res.browser.startswith("firefox")
