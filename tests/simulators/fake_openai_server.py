"""A scripted stand-in for an OpenAI-compatible server, for fault-injection tests.

Each ``POST /v1/chat/completions`` consumes the next :class:`Step` of the script (the last one
repeats): wait ``delay`` seconds, then answer ``status`` with ``body``, or with ``hang_up``
close the connection without any answer, as a crashing server does. A 200 step without a
body answers a normal completion whose text echoes the last message, so batch-order tests can
check which reply belongs to which request. Every request body and arrival time is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional


@dataclass
class Step:
    status: int = 200
    body: Optional[dict] = None
    delay: float = 0.0
    headers: Dict[str, str] = field(default_factory=dict)
    hang_up: bool = False


def completion(text: str, finish_reason: str = "stop") -> dict:
    return {"id": "fake", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class FakeOpenAIServer:
    def __init__(self, script: List[Step], models_status: int = 200,
                 models: tuple = ("fake",)):
        self.script = list(script) or [Step()]
        self.models_status = models_status
        self.models = tuple(models)  # the names GET /v1/models lists (clients check theirs)
        self.requests: List[dict] = []
        self.times: List[float] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True  # a "hanging" handler must not block shutdown
        # A short poll interval keeps shutdown() (which waits for one poll) fast.
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def attempts(self) -> int:
        return len(self.requests)

    def _next_step(self, body: dict) -> Step:
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.times.append(time.monotonic())
            return self.script[min(index, len(self.script) - 1)]

    def _handler(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, body: dict, headers: Dict[str, str] = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # client timed out first
                    pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/v1/models"):
                    self._send(owner.models_status,
                               {"object": "list", "data": [{"id": name, "object": "model"}
                                                           for name in owner.models]})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/v1/chat/completions"):
                    self._send(404, {"detail": "Not Found"})
                    return
                step = owner._next_step(body)
                time.sleep(step.delay)
                if step.hang_up:
                    self.close_connection = True
                    return
                if step.body is not None:
                    self._send(step.status, step.body, step.headers)
                elif step.status == 200:
                    last = body["messages"][-1]["content"]
                    self._send(200, completion(f"echo: {last}"), step.headers)
                else:
                    self._send(step.status, {"error": {"message": f"scripted {step.status}"}},
                               step.headers)

        return Handler

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
