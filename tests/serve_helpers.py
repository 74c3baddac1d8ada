"""Test helpers: a real ``transformers serve`` subprocess on a free loopback port.

    with transformers_serve(model_dir) as base_url:   # "http://127.0.0.1:PORT/v1"
        ...

The command is ``python -m transformers.cli.transformers serve --device cpu --host 127.0.0.1
--port N MODEL_DIR`` (the same as the ``transformers serve ...`` console script, but with this
interpreter). MODEL_DIR is passed as the positional FORCE_MODEL, so the model is loaded before
the port opens and every request must name exactly that string as its ``model``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Iterator, List, Optional


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_tiny(tmp_path, seed: int = 0) -> str:
    """The tiny random Llama model + tokenizer in ``tmp_path/tiny-llama``; returns the path."""
    from sweet_rl.models.tiny_model import build_tiny_model

    return build_tiny_model(os.path.join(str(tmp_path), "tiny-llama"), seed=seed)


def serve_command(model_dir: str, port: int, host: str = "127.0.0.1") -> List[str]:
    import importlib.util

    # This interpreter's CLI module (transformers 5.x); else the console script on PATH.
    if importlib.util.find_spec("transformers.cli.transformers") is not None:
        launcher = [sys.executable, "-m", "transformers.cli.transformers"]
    else:
        launcher = [shutil.which("transformers") or "transformers"]
    return launcher + ["serve", "--device", "cpu", "--host", host, "--port", str(port), model_dir]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _log_tail(path: str, chars: int = 3000) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()[-chars:]


@contextlib.contextmanager
def transformers_serve(model_dir: str, port: Optional[int] = None,
                       startup_timeout: float = 120.0) -> Iterator[str]:
    """Run ``transformers serve`` on ``model_dir``; yield its base URL; kill it afterwards."""
    port = port or free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_UPDATE_CHECK="1",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    log = tempfile.NamedTemporaryFile("w+", prefix="transformers-serve-", suffix=".log",
                                      delete=False)
    # Own session/process group, so the server and anything it forks die together.
    process = subprocess.Popen(serve_command(model_dir, port), stdout=log,
                               stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout
        while not _healthy(f"http://127.0.0.1:{port}/health"):
            if process.poll() is not None:
                raise RuntimeError(f"transformers serve exited with {process.returncode}:\n"
                                   f"{_log_tail(log.name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve not healthy after {startup_timeout:.0f}"
                                   f" s:\n{_log_tail(log.name)}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(process)
        log.close()
        os.unlink(log.name)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
