"""Where frontend screenshots live and how trajectory files refer to them.

Frontend trajectories carry the HTML of every page (portable) and the path of its PNG. The
paths are stored relative to the folder of the JSONL file that holds them, so a run's folder
can be moved or copied as a whole; an absolute path is kept as given. Names are the content
hash of the HTML, so the same page rendered twice (a resumed run, a reference shared by k
rollouts) is one file.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional

SCREENSHOT_SUFFIX = ".png"


def page_key(html: str) -> str:
    """A short, stable name for a page: the first 20 hex digits of the SHA-1 of its HTML."""
    return hashlib.sha1(html.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def default_screenshot_dir(jsonl_path: str) -> str:
    """``outputs/run.jsonl`` -> ``outputs/run_screenshots`` (beside the file it serves)."""
    stem, _ = os.path.splitext(jsonl_path)
    return stem + "_screenshots"


def screenshot_path(directory: str, html: str, kind: str = "page") -> str:
    """``<directory>/<kind>_<hash>.png``; ``kind`` is e.g. ``page`` or ``reference``."""
    return os.path.join(directory, f"{kind}_{page_key(html)}{SCREENSHOT_SUFFIX}")


def to_stored(path: Optional[str], jsonl_path: str) -> Optional[str]:
    """The form written into the JSONL: relative to the file's folder (``None`` stays)."""
    if path is None:
        return None
    base = os.path.dirname(os.path.abspath(jsonl_path))
    return os.path.relpath(os.path.abspath(path), base)


def resolve(stored: Optional[str], jsonl_path: str) -> Optional[str]:
    """The path on disk for a stored value: absolute as is, relative against the file's folder."""
    if not stored:
        return None
    if os.path.isabs(stored):
        return stored
    return os.path.join(os.path.dirname(os.path.abspath(jsonl_path)), stored)
