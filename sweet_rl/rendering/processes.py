"""Finding and killing a browser's processes, and finding its binaries (Linux /proc)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Iterable, List, Optional


def pids_with(marker: str) -> List[int]:
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


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def find_binary(env: str, candidates, name: str) -> Optional[str]:
    if os.environ.get(env):
        return os.environ[env]
    for c in candidates:
        if os.path.exists(c):
            return c
    return shutil.which(name)


def quietly(fn) -> None:
    try:
        fn()
    except Exception:
        pass
