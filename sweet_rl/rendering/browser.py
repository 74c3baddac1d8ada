"""Render HTML pages to full-page PNG screenshots, offline, with Selenium.

Every page is served from a small HTTP server on 127.0.0.1 that this module
starts.  Before a page is served its HTML is rewritten so that

* the Tailwind stylesheet linked from a CDN comes from the local asset cache
  (see :mod:`sweet_rl.rendering.assets`), and
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
import itertools
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional

from sweet_rl.rendering import assets as page_assets
from sweet_rl.rendering.page_server import PageServer
from sweet_rl.rendering.processes import find_binary, kill_all, pids_with, quietly
from sweet_rl.rendering.result import RenderResult, crop_png

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

        binary = find_binary("SWEET_RL_CHROMIUM", _CHROMIUM_CANDIDATES, "chromium")
        driver_bin = find_binary("SWEET_RL_CHROMEDRIVER", _CHROMEDRIVER_CANDIDATES, "chromedriver")
        if driver_bin is None:
            raise RuntimeError(
                "chromedriver not found (install chromium-driver or set SWEET_RL_CHROMEDRIVER)"
            )
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
            {
                "width": VIEWPORT_WIDTH,
                "height": VIEWPORT_HEIGHT,
                "deviceScaleFactor": 1,
                "mobile": False,
            },
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

        driver_bin = find_binary("SWEET_RL_GECKODRIVER", (), "geckodriver")
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
        pids = pids_with(self.profile_dir)
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
        for pid in pids_with(self.profile_dir):
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
        kill_all(self.pids())

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
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            msg = f"{type(exc).__name__}: {first_line}"
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
                png = crop_png(png, clip_h)
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
            t = threading.Thread(target=quietly, args=(driver.quit,), daemon=True)
            t.start()
            t.join(grace)
        # Whatever survived quit() (or quit() hung) is killed.
        for _ in range(50):  # up to ~5 s for the kernel to finish them off
            left = self.pids()
            if not left:
                break
            kill_all(left)
            time.sleep(0.1)
        shutil.rmtree(self.profile_dir, ignore_errors=True)
