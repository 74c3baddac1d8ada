"""The local page server every rendered page comes from (stdlib only).

Before a page is served its HTML is rewritten so that the Tailwind stylesheet linked from a CDN
comes from the local asset cache (:mod:`sweet_rl.rendering.assets`) and picsum.photos /
source.unsplash.com pictures become local placeholder images of the same size. The server is
also the browser's proxy: it answers every proxy request with 403 and writes it into its
``blocked`` log, so nothing a page asks for leaves the machine.
"""

from __future__ import annotations

import functools
import http.server
import itertools
import os
import re
import threading
from pathlib import Path
from typing import Callable, Dict, List, Optional

from sweet_rl.rendering import assets as page_assets


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
        self.send_header(
            "Cache-Control", "no-store" if ctype.startswith("text/html") else "max-age=3600"
        )
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
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="page-server", daemon=True
        )
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
