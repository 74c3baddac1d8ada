"""Render HTML pages to full-page PNG screenshots, offline, with Selenium.

Every page is served from a small HTTP server on 127.0.0.1 that this module
starts.  Before a page is served its HTML is rewritten so that

* the Tailwind stylesheet linked from a CDN comes from the local asset cache
  (see :mod:`sweet_rl.evaluation.page_assets`), and
* picsum.photos / source.unsplash.com pictures become local placeholder
  images of the same size.

Everything else the page asks for from the network is refused: the browser's
proxy is the local server itself, which answers any proxy request with 403
and writes it into its ``blocked`` log, host names do not resolve, and (on
Chromium) DevTools blocks the URLs as well.  Nothing leaves the machine.

Hostile pages are bounded: page-load and script timeouts, a watchdog that
kills the browser when a command hangs anyway (e.g. a renderer stuck in
``while(true){}``), dialogs dismissed, and screenshots clipped to a maximum
height.  A failed page gives a ``RenderResult`` with ``ok=False``; a browser
that died or timed out is replaced before the next page.

    with DriverPool() as pool:
        result = pool.render(html)
        if result.ok:
            result.save("page.png")
"""

from __future__ import annotations

import base64
import functools
import http.server
import itertools
import os
import queue
import re
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

from sweet_rl.evaluation import page_assets

VIEWPORT_WIDTH = 1280
VIEWPORT_HEIGHT = 800
MAX_HEIGHT = 8000

DEFAULT_PAGE_LOAD_TIMEOUT = 20.0
DEFAULT_SCRIPT_TIMEOUT = 5.0

_CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
_CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")

# Dialogs would block the page; replace them before any page script runs.
_NO_DIALOGS_JS = (
    "window.alert=function(){};window.confirm=function(){return false;};"
    "window.prompt=function(){return null;};window.print=function(){};"
)

_HEIGHT_JS = (
    "var d=document.documentElement,b=document.body;"
    "return Math.max(d?d.scrollHeight:0,b?b.scrollHeight:0,d?d.offsetHeight:0,b?b.offsetHeight:0);"
)


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


@dataclass
class RenderResult:
    ok: bool
    png: Optional[bytes]
    width: int
    height: int
    browser: str  # "chrome 156.0.8078.79", "firefox 128.0", ...
    error: Optional[str] = None
    page_height: int = 0  # document height before clipping
    seconds: float = 0.0
    session_id: Optional[int] = None  # which pooled browser rendered the page

    def save(self, path) -> Path:
        if not self.ok or self.png is None:
            raise ValueError(f"no screenshot to save: {self.error}")
        path = Path(path)
        path.write_bytes(self.png)
        return path


# --------------------------------------------------------------------------
# HTML rewriting
# --------------------------------------------------------------------------

_URL_TAIL = r"[^\s\"'<>()\\]*"
_TAILWIND_RE = re.compile(
    r"(?:https?:)?//[^\s\"'<>()\\]*tailwind[^\s\"'<>()\\]*?\.css(?:\?" + _URL_TAIL + ")?",
    re.IGNORECASE,
)
_PICSUM_RE = re.compile(
    r"(?:https?:)?//(?:i\.)?picsum\.photos/(?:id/\d+/|seed/[^/\s\"'<>()]+/)?(\d+)(?:/(\d+))?"
    + _URL_TAIL,
    re.IGNORECASE,
)
_UNSPLASH_RE = re.compile(
    r"(?:https?:)?//source\.unsplash\.com/(?:[A-Za-z0-9_-]+/)*?(\d+)x(\d+)" + _URL_TAIL,
    re.IGNORECASE,
)


def rewrite_html(html: str, base_url: str) -> str:
    """Point CDN Tailwind and picsum/unsplash pictures at the local server ``base_url``."""
    base = base_url.rstrip("/")

    def image(match: "re.Match") -> str:
        w = match.group(1)
        h = match.group(2) or w
        w, h = page_assets.clamp_size(w, h)
        return f"{base}/img/{w}/{h}.png"

    html = _TAILWIND_RE.sub(f"{base}/assets/tailwind.min.css", html)
    html = _PICSUM_RE.sub(image, html)
    html = _UNSPLASH_RE.sub(image, html)
    return html


# --------------------------------------------------------------------------
# Local server
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _placeholder(width: int, height: int) -> bytes:
    return page_assets.placeholder_png(width, height)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # silence stderr
        pass

    def _refuse(self) -> None:
        self.server.owner._record(self, blocked=True, status=403)
        try:
            self.send_response(403, "Blocked: offline renderer")
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
        except OSError:
            pass
        self.close_connection = True

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.server.owner._record(self, blocked=False, status=status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store" if ctype.startswith("text/html") else "max-age=3600")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        owner = self.server.owner
        # A proxy-form request ("GET http://elsewhere/...") or a CONNECT is the
        # browser trying to reach another host: refuse it.
        if self.command == "CONNECT" or not self.path.startswith("/"):
            self._refuse()
            return
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        route = owner.routes.get(path)
        if route is not None:
            owner._record(self, blocked=False, status=200)
            route(self)
            return
        if path.startswith("/page/"):
            html = owner.pages.get(path[len("/page/"):])
            if html is None:
                self._send(404, b"no such page", "text/plain")
            else:
                self._send(200, html.encode("utf-8", "replace"), "text/html; charset=utf-8")
            return
        if path == "/assets/tailwind.min.css":
            css = owner.tailwind_css()
            if css is None:
                self._send(404, b"", "text/css")
            else:
                self._send(200, css, "text/css; charset=utf-8")
            return
        m = re.fullmatch(r"/img/(\d+)/(\d+)\.png", path)
        if m:
            w, h = page_assets.clamp_size(m.group(1), m.group(2))
            self._send(200, _placeholder(w, h), "image/png")
            return
        if path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
            return
        self._send(404, b"not found", "text/plain")

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = do_CONNECT = _handle


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: "PageServer"


class PageServer:
    """Thread-safe local server for pages, the stylesheet and placeholder images.

    ``log`` lists every request it received (dicts with method, path, host,
    client, status, blocked); ``blocked`` is the subset it refused.  Extra
    routes (path -> callable(handler)) can be added for tests.
    """

    def __init__(self, tailwind: Optional[Path] = None, keep_log: int = 10000):
        self._tailwind_file = tailwind
        self._tailwind_bytes: Optional[bytes] = None
        self.pages: Dict[str, str] = {}
        self.routes: Dict[str, Callable] = {}
        self.log: List[dict] = []
        self._keep_log = keep_log
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="page-server", daemon=True)
        self._thread.start()

    # -- content ----------------------------------------------------------
    def tailwind_css(self) -> Optional[bytes]:
        if self._tailwind_bytes is None and self._tailwind_file is not None:
            try:
                self._tailwind_bytes = Path(self._tailwind_file).read_bytes()
            except OSError:
                return None
        return self._tailwind_bytes

    def add_page(self, html: str, rewrite: bool = True) -> str:
        token = f"{next(self._ids)}-{os.urandom(4).hex()}.html"
        self.pages[token] = rewrite_html(html, self.base_url) if rewrite else html
        return f"{self.base_url}/page/{token}"

    def remove_page(self, url: str) -> None:
        self.pages.pop(url.rsplit("/", 1)[-1], None)

    # -- log --------------------------------------------------------------
    def _record(self, handler: _Handler, blocked: bool, status: int) -> None:
        entry = {
            "method": handler.command,
            "path": handler.path,
            "host": handler.headers.get("Host", ""),
            "client": handler.client_address[0],
            "status": status,
            "blocked": blocked,
        }
        with self._lock:
            self.log.append(entry)
            if len(self.log) > self._keep_log:
                del self.log[: len(self.log) - self._keep_log]

    @property
    def blocked(self) -> List[dict]:
        with self._lock:
            return [e for e in self.log if e["blocked"]]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# --------------------------------------------------------------------------
# Browser processes
# --------------------------------------------------------------------------


def _pids_with(marker: str) -> List[int]:
    """Processes whose command line contains ``marker`` (Linux /proc; else empty)."""
    pids = []
    proc = Path("/proc")
    if not proc.is_dir():
        return pids
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd:
            pids.append(int(entry.name))
    return pids


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _find_binary(env: str, candidates, name: str) -> Optional[str]:
    if os.environ.get(env):
        return os.environ[env]
    for c in candidates:
        if os.path.exists(c):
            return c
    return shutil.which(name)


class BrowserSession:
    """One WebDriver with its own profile directory; knows how to die cleanly."""

    _ids = itertools.count(1)

    def __init__(
        self,
        server: PageServer,
        browser: str = "chromium",
        page_load_timeout: float = DEFAULT_PAGE_LOAD_TIMEOUT,
        script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
        max_height: int = MAX_HEIGHT,
    ):
        self.id = next(self._ids)
        self.server = server
        self.kind = browser
        self.page_load_timeout = page_load_timeout
        self.script_timeout = script_timeout
        self.max_height = max_height
        self.pages_rendered = 0
        self.broken = False
        self.killed = False
        self.profile_dir = tempfile.mkdtemp(prefix=f"sweet_rl_browser_{os.getpid()}_{self.id}_")
        self.driver = None
        self._service_pid: Optional[int] = None
        try:
            if browser in ("chromium", "chrome"):
                self._start_chromium()
            elif browser == "firefox":
                self._start_firefox()
            else:
                raise ValueError(f"unknown browser {browser!r} (use 'chromium' or 'firefox')")
        except BaseException:
            self.close()
            raise
        caps = self.driver.capabilities
        self.browser_name = f"{caps.get('browserName', browser)} {caps.get('browserVersion', '?')}"

    # -- start ------------------------------------------------------------
    def _start_chromium(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        binary = _find_binary("SWEET_RL_CHROMIUM", _CHROMIUM_CANDIDATES, "chromium")
        driver_bin = _find_binary("SWEET_RL_CHROMEDRIVER", _CHROMEDRIVER_CANDIDATES, "chromedriver")
        if driver_bin is None:
            raise RuntimeError("chromedriver not found (install chromium-driver or set SWEET_RL_CHROMEDRIVER)")
        opts = webdriver.ChromeOptions()
        if binary:
            opts.binary_location = binary
        for arg in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-quic",
            "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
            "--hide-scrollbars",
            "--mute-audio",
            "--force-device-scale-factor=1",
            "--force-color-profile=srgb",
            f"--window-size={VIEWPORT_WIDTH},{VIEWPORT_HEIGHT}",
            f"--user-data-dir={self.profile_dir}",
            # Every non-local request goes to our own server, which refuses it;
            # host names never resolve in case anything skips the proxy.
            f"--proxy-server=http://127.0.0.1:{self.server.port}",
            '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
        ):
            opts.add_argument(arg)
        opts.unhandled_prompt_behavior = "dismiss"
        opts.page_load_strategy = "normal"
        service = Service(executable_path=driver_bin, log_output=os.devnull)
        self.driver = webdriver.Chrome(options=opts, service=service)
        self._service_pid = getattr(service.process, "pid", None)
        self._apply_timeouts()
        cdp = self.driver.execute_cdp_cmd
        cdp("Page.addScriptToEvaluateOnNewDocument", {"source": _NO_DIALOGS_JS})
        cdp(
            "Emulation.setDeviceMetricsOverride",
            {"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        cdp("Network.enable", {})
        local = f"http://127.0.0.1:{self.server.port}/*"
        try:  # Newer Chromium: ordered patterns with an exception for the local server.
            cdp(
                "Network.setBlockedURLs",
                {
                    "urlPatterns": [
                        {"urlPattern": local, "block": False},
                        {"urlPattern": "*://*:*/*", "block": True},
                    ]
                },
            )
        except Exception:
            # Older protocol: plain wildcards, which cannot except the local
            # server; plain http is then left to the proxy and resolver rules.
            cdp("Network.setBlockedURLs", {"urls": ["https://*", "ws://*", "wss://*", "ftp://*"]})

    def _start_firefox(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.firefox.service import Service

        driver_bin = _find_binary("SWEET_RL_GECKODRIVER", (), "geckodriver")
        if driver_bin is None:
            raise RuntimeError("geckodriver not found (install it or set SWEET_RL_GECKODRIVER)")
        opts = webdriver.FirefoxOptions()
        opts.add_argument("-headless")
        opts.add_argument("-profile")
        opts.add_argument(self.profile_dir)
        prefs = {
            "network.proxy.type": 1,
            "network.proxy.http": "127.0.0.1",
            "network.proxy.http_port": self.server.port,
            "network.proxy.ssl": "127.0.0.1",
            "network.proxy.ssl_port": self.server.port,
            "network.proxy.no_proxies_on": f"127.0.0.1:{self.server.port}",
            "network.proxy.allow_hijacking_localhost": False,
            "network.dns.disablePrefetch": True,
            "network.prefetch-next": False,
            "app.update.enabled": False,
            "browser.shell.checkDefaultBrowser": False,
            "datareporting.healthreport.uploadEnabled": False,
            "toolkit.telemetry.enabled": False,
            "dom.disable_beforeunload": True,
            "layout.css.devPixelsPerPx": "1.0",
        }
        for k, v in prefs.items():
            opts.set_preference(k, v)
        opts.unhandled_prompt_behavior = "dismiss"
        service = Service(executable_path=driver_bin, log_output=os.devnull)
        self.driver = webdriver.Firefox(options=opts, service=service)
        self._service_pid = getattr(service.process, "pid", None)
        self.driver.set_window_size(VIEWPORT_WIDTH, VIEWPORT_HEIGHT)
        self._apply_timeouts()

    def _apply_timeouts(self) -> None:
        self.driver.set_page_load_timeout(self.page_load_timeout)
        self.driver.set_script_timeout(self.script_timeout)

    # -- health -----------------------------------------------------------
    def pids(self) -> List[int]:
        pids = _pids_with(self.profile_dir)
        if self._service_pid is not None and Path(f"/proc/{self._service_pid}").exists():
            pids.append(self._service_pid)
        return pids

    def alive(self) -> bool:
        if self.broken or self.driver is None:
            return False
        return self.processes_alive()

    def processes_alive(self) -> bool:
        """Whether the browser's main process still runs (True where unknowable)."""
        if not Path("/proc").is_dir():
            return True
        # The browser's main process carries the profile dir and no --type=.
        for pid in _pids_with(self.profile_dir):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                status = Path(f"/proc/{pid}/stat").read_text().split()
            except OSError:
                continue
            if b"--type=" not in cmd and status[2] != "Z":
                return True
        return self.kind == "firefox"  # Firefox's profile flag is on the main process only

    def kill(self) -> None:
        """Hard stop: the watchdog's tool when a command hangs."""
        self.broken = True
        self.killed = True
        _kill(self.pids())

    # -- render -----------------------------------------------------------
    def render(self, html: str) -> RenderResult:
        start = time.monotonic()
        url = self.server.add_page(html)
        self._deadline = 0.0
        try:
            png, page_h = self._capture(url)
            w, h = page_assets.png_size(png)
            self.pages_rendered += 1
            return RenderResult(True, png, w, h, self.browser_name, None, page_h,
                                time.monotonic() - start, self.id)
        except Exception as exc:  # any failure is a result, never a raise
            self.broken = True  # a page that failed may have left the tab unusable
            msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            if self.killed:
                msg = f"watchdog killed the browser after {self._deadline:.0f}s ({msg})"
            return RenderResult(False, None, 0, 0, self.browser_name, msg, 0,
                                time.monotonic() - start, self.id)
        finally:
            self._disarm()
            self.server.remove_page(url)

    # The watchdog: if a WebDriver command outlives its phase's budget (a
    # renderer stuck in a script ignores WebDriver's own timeouts), the
    # browser is killed, which makes the hanging command fail at once.
    _timer: Optional[threading.Timer] = None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = seconds
        self._timer = threading.Timer(seconds, self.kill)
        self._timer.daemon = True
        self._timer.start()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _capture(self, url: str):
        d = self.driver
        self._arm(self.page_load_timeout + 5.0)
        d.get(url)
        self._arm(2 * self.script_timeout + 10.0)
        page_h = int(d.execute_script(_HEIGHT_JS) or 0)
        clip_h = max(1, min(page_h, self.max_height))
        if self.kind == "firefox":
            png = d.get_full_page_screenshot_as_png()
            if page_assets.png_size(png)[1] > clip_h:
                png = _crop_png(png, clip_h)
            return png, page_h
        shot = d.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "fromSurface": True,
                "clip": {"x": 0, "y": 0, "width": VIEWPORT_WIDTH, "height": clip_h, "scale": 1},
            },
        )
        return base64.b64decode(shot["data"]), page_h

    # -- close ------------------------------------------------------------
    def close(self, grace: float = 5.0) -> None:
        driver, self.driver = self.driver, None
        if driver is not None:
            t = threading.Thread(target=_quietly, args=(driver.quit,), daemon=True)
            t.start()
            t.join(grace)
        # Whatever survived quit() (or quit() hung) is killed.
        for _ in range(50):  # up to ~5 s for the kernel to finish them off
            left = self.pids()
            if not left:
                break
            _kill(left)
            time.sleep(0.1)
        shutil.rmtree(self.profile_dir, ignore_errors=True)


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:
        pass


def _crop_png(png: bytes, height: int) -> bytes:
    w, h, ch, rows = page_assets.decode_png(png)
    out = []
    for row in rows[:height]:
        if ch == 3:
            out.append(bytes(row))
        elif ch == 4:
            out.append(bytes(b for i, b in enumerate(row) if i % 4 != 3))
        else:
            raise ValueError("unexpected screenshot format")
    return page_assets.encode_png(w, len(out), out)


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
            _kill(_pids_with(d))
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


def render_html(html: str, **pool_kwargs) -> RenderResult:
    """Render one page with a throwaway single-browser pool."""
    with DriverPool(size=1, **pool_kwargs) as pool:
        return pool.render(html)
