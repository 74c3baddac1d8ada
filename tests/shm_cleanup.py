"""DeepSpeed's CPU collectives leave their shared-memory buffers behind.

Each rank of a run under DeepSpeed's launcher on the CPU creates
``/dev/shm/deepspeed_allreduce_buffer_<rank>_<address>_<port>_<n>`` (69 MB here) and never
removes it, so a machine that runs the suite again and again fills its shared memory until
the kernel kills processes. At the end of a session the suite removes the buffers created
since it started that no live process still maps (another run may be using its own).
"""

from __future__ import annotations

import glob
import os
from typing import Iterable, List, Set

PATTERN = "deepspeed_allreduce_buffer_*"


def mapped_paths() -> Set[str]:
    """Every file some live process maps (that this process may read)."""
    paths: Set[str] = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            with open(maps, errors="replace") as handle:
                paths.update(line.split(None, 5)[5].strip() for line in handle
                             if line.count(" ") >= 5 and "/" in line)
        except OSError:  # the process ended, or it is not ours to read
            continue
    return paths


def stale_buffers(folder: str, since: float, in_use: Iterable[str]) -> List[str]:
    """The DeepSpeed buffers in ``folder`` modified at or after ``since`` and not in
    ``in_use``."""
    busy = set(in_use)
    return sorted(path for path in glob.glob(os.path.join(folder, PATTERN))
                  if os.path.getmtime(path) >= since and path not in busy)


def remove_stale_buffers(folder: str, since: float) -> List[str]:
    """Remove :func:`stale_buffers`; returns what it removed."""
    removed = []
    for path in stale_buffers(folder, since, mapped_paths()):
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed
