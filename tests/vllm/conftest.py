"""Fixtures of the vLLM tests: vLLM's engine, on the CPU through vLLM's CPU build (run in the
vLLM environment, scripts/vllm_env.sh; every test file here is marked `vllm`, and
tests/conftest.py skips them where vLLM is not installed).

Engine starts are most of what these tests cost on 2 cores, so they are shared:
* in this process the engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, about 5 s
  to start, against about 40 s for the spawned engine-core and worker processes), one engine
  per model for the whole session;
* the stage scripts run as a user runs them: in their own process, with vLLM's spawned
  engine processes (so their ``__main__`` guard is exercised);
* the two OpenAI-compatible servers (the simulated human) start once, in the background, when
  the first test here starts, and are torn down at the end: their process groups are killed
  and every process they started is checked to be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import List

import pytest

from tests.conftest import HAS_VLLM, REPO_ROOT

if HAS_VLLM:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache per engine
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engines of this process: in-process

SERVED_NAME = "tiny"  # the model name the servers serve (simulate's --env_model)
SERVER_COUNT = 2
SERVER_START_S = 300.0  # two servers starting side by side on 2 cores take about 90 s


def script_env() -> dict:
    """The environment of a stage script or server: vLLM's default (spawned) engine, this
    checkout first on the path, no hub."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    env.update(PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    return env


def run_script(args: List[str], timeout: float = 400.0) -> subprocess.CompletedProcess:
    """``python scripts/ARGS...`` in its own process group; killed, group and all, on timeout."""
    process = subprocess.Popen([sys.executable] + args, cwd=str(REPO_ROOT), env=script_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_tree(process)
        raise
    result = subprocess.CompletedProcess(process.args, process.returncode, out, "")
    assert result.returncode == 0, out[-4000:]
    return result


def stop_tree(process: subprocess.Popen) -> List[int]:
    """Stop ``process`` and everything it started: SIGTERM to its process group, up to 20 s
    for all of them to exit, then SIGKILL to the group and to any that left it. Returns the
    pids that outlived even that (none, when the teardown worked)."""
    import psutil

    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            for child in family:  # a child that left the group: never leave it running
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        _, family = psutil.wait_procs(family, timeout=grace)
        if not family:
            break
    return [child.pid for child in family if _running(child)]


def _running(child) -> bool:
    import psutil

    try:
        return child.is_running() and child.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="session")
def vllm_model(tmp_path_factory) -> str:
    """The tiny Llama with heads of 32 values (vLLM's CPU attention takes no 16)."""
    from sweet_rl.models.tiny_model import build_tiny_model

    return build_tiny_model(str(tmp_path_factory.mktemp("tiny-llama-hd32")), seed=0, head_dim=32)


@pytest.fixture(scope="session")
def stop_model(tmp_path_factory, vllm_model) -> str:
    """The same with a louder <|eot_id|>: about half of the candidates sampled for the sample
    tests' records stop within 12 tokens, none at once (measured with transformers)."""
    from tests.model_helpers import loud_stop_model

    return loud_stop_model(vllm_model, str(tmp_path_factory.mktemp("stop-hd32")), norm=3.0,
                           direction_seed=1)


def _engine(model_dir):
    from sweet_rl.models import vllm_engine

    llm = vllm_engine.load_llm(model_dir, seed=0)
    yield llm
    vllm_engine.close_llm(llm)


@pytest.fixture(scope="session")
def llm(vllm_model):
    """One in-process engine on :func:`vllm_model` for the whole session."""
    yield from _engine(vllm_model)


@pytest.fixture(scope="session")
def stop_llm(stop_model):
    yield from _engine(stop_model)


class Servers:
    """``python -m vllm.entrypoints.openai.api_server`` (what ``vllm serve`` runs) on loopback,
    started without waiting; :meth:`urls` waits until every one answers /health."""

    def __init__(self, model_dir: str, count: int):
        from sweet_rl.models.vllm_engine import server_command
        from tests.serve_helpers import free_port

        self.ports = [free_port() for _ in range(count)]
        self.logs = [tempfile.NamedTemporaryFile("w+", prefix="vllm-serve-", suffix=".log",
                                                 delete=False) for _ in range(count)]
        self.processes = [
            subprocess.Popen(server_command(model_dir, SERVED_NAME, port, max_model_len=4096,
                                            cpu=True),
                             stdout=log, stderr=subprocess.STDOUT, env=script_env(),
                             start_new_session=True)
            for port, log in zip(self.ports, self.logs)]
        self.ready = False

    def urls(self) -> List[str]:
        from tests.serve_helpers import _healthy

        deadline = time.monotonic() + SERVER_START_S
        for port, process, log in zip(self.ports, self.processes, self.logs):
            while not _healthy(f"http://127.0.0.1:{port}/health"):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"vLLM server on port {port} did not start:\n"
                                       f"{log.read()[-4000:]}")
                time.sleep(1.0)
        self.ready = True
        return [f"127.0.0.1:{port}" for port in self.ports]

    def stop(self) -> List[int]:
        alive = [pid for process in self.processes for pid in stop_tree(process)]
        for log in self.logs:
            log.close()
            os.unlink(log.name)
        return alive


@pytest.fixture(scope="session")
def servers(tmp_path_factory, vllm_model):
    started = Servers(vllm_model, SERVER_COUNT)
    yield started
    leftovers = started.stop()
    assert leftovers == [], f"server processes left running after the teardown: {leftovers}"


@pytest.fixture(scope="session", autouse=True)
def _servers_start_early(request):
    """The servers start with the first vLLM test (they take the longest); tests that need
    them come last (test_served_*.py)."""
    if HAS_VLLM and any(item.fspath.basename.startswith("test_served_")
                        for item in request.session.items):
        request.getfixturevalue("servers")
