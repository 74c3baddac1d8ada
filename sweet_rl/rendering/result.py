"""What rendering one page gives: a :class:`RenderResult` (the PNG or why there is none)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sweet_rl.rendering import assets as page_assets


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


def crop_png(png: bytes, height: int) -> bytes:
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
