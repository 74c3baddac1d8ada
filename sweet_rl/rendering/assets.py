"""Offline assets for rendering frontend pages: Tailwind and placeholder images.

The reference pages of the frontend benchmark load Tailwind 2.2.19 from a CDN
and their pictures from picsum.photos.  Rendering must not touch the network,
so the stylesheet is fetched once (with ``npm pack``, through whatever npm
registry the machine is configured for) into a local cache, and pictures are
replaced by a deterministic placeholder of the same size.

Fill the cache with::

    python -m sweet_rl.rendering.assets
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Optional, Tuple

TAILWIND_VERSION = "2.2.19"
TAILWIND_FILE = f"tailwind-{TAILWIND_VERSION}.min.css"
_TARBALL_MEMBER = "package/dist/tailwind.min.css"

# Placeholder image bounds (pixels).
MIN_SIDE = 1
MAX_SIDE = 4000


class AssetsMissing(RuntimeError):
    """The offline asset cache has not been filled."""


def cache_dir(override: Optional[str] = None) -> Path:
    """Directory of the asset cache: argument, else $SWEET_RL_ASSETS, else ~/.cache."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("SWEET_RL_ASSETS")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "sweet_rl" / "assets"


def fetch_tailwind(cache: Optional[str] = None, npm: str = "npm", timeout: float = 300.0) -> Path:
    """Put Tailwind's minified stylesheet into the cache (once) and return its path.

    Uses ``npm pack tailwindcss@VERSION`` in a scratch directory, so the
    registry is whatever npm is configured to use; nothing is downloaded when
    the file is already cached.
    """
    target = cache_dir(cache) / TAILWIND_FILE
    if target.is_file() and target.stat().st_size > 0:
        return target
    npm_bin = shutil.which(npm)
    if npm_bin is None:
        raise AssetsMissing(f"cannot fetch Tailwind: '{npm}' is not on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sweet_rl_npm_") as scratch:
        proc = subprocess.run(
            [npm_bin, "pack", f"tailwindcss@{TAILWIND_VERSION}", "--silent"],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        tarballs = sorted(Path(scratch).glob("tailwindcss-*.tgz"))
        if proc.returncode != 0 or not tarballs:
            raise AssetsMissing(
                "npm pack tailwindcss@%s failed (rc=%s): %s"
                % (TAILWIND_VERSION, proc.returncode, (proc.stderr or proc.stdout).strip()[-500:])
            )
        with tarfile.open(tarballs[0], "r:gz") as tar:
            try:
                member = tar.getmember(_TARBALL_MEMBER)
            except KeyError as exc:
                raise AssetsMissing(f"{tarballs[0].name} has no {_TARBALL_MEMBER}") from exc
            data = tar.extractfile(member).read()
    # Write atomically so a concurrent reader never sees half a file.
    partial = target.with_suffix(f".part{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, target)
    return target


def tailwind_path(cache: Optional[str] = None) -> Path:
    """Path of the cached stylesheet; raises AssetsMissing with the fix if absent."""
    path = cache_dir(cache) / TAILWIND_FILE
    if not path.is_file():
        raise AssetsMissing(
            f"Tailwind {TAILWIND_VERSION} is not in the asset cache ({path}). "
            "Fill it once with `python -m sweet_rl.rendering.assets` "
            "(needs npm and a reachable npm registry; set SWEET_RL_ASSETS to move the cache)."
        )
    return path


def clamp_size(width: int, height: int) -> Tuple[int, int]:
    def one(v) -> int:
        try:
            v = int(v)
        except (TypeError, ValueError):
            v = MIN_SIDE
        return max(MIN_SIDE, min(MAX_SIDE, v))

    return one(width), one(height)


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF)
    )


def encode_png(width: int, height: int, rows) -> bytes:
    """Encode 8-bit RGB rows (each ``bytes`` of length 3*width) as a PNG."""
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(raw, 6))
        + _png_chunk(b"IEND", b"")
    )


# Placeholder colours: a mid grey with a darker diagonal band, so the image
# has some structure for image-similarity models but is the same every time.
_BASE = (160, 166, 173)
_BAND = (120, 126, 133)


def placeholder_png(width: int, height: int) -> bytes:
    """A deterministic placeholder picture of (clamped) size width x height, as PNG bytes."""
    width, height = clamp_size(width, height)
    try:  # Pillow is optional: use it when present, the result is identical in size.
        from PIL import Image, ImageDraw  # type: ignore

        img = Image.new("RGB", (width, height), _BASE)
        draw = ImageDraw.Draw(img)
        band = max(1, min(width, height) // 8)
        draw.polygon(
            [(0, height), (band, height), (width, 0), (width - band, 0)], fill=_BAND
        )
        import io

        buf = io.BytesIO()
        img.save(buf, format="PNG", optimize=False)
        return buf.getvalue()
    except ImportError:
        pass
    band = max(1, min(width, height) // 8)
    base_px = bytes(_BASE)
    band_px = bytes(_BAND)
    rows = []
    for y in range(height):
        # Column of the diagonal from bottom-left to top-right at this row.
        centre = int((height - 1 - y) * width / max(1, height))
        lo, hi = max(0, centre - band // 2), min(width, centre + band // 2 + 1)
        rows.append(base_px * lo + band_px * (hi - lo) + base_px * (width - hi))
    return encode_png(width, height, rows)


def decode_png(data: bytes):
    """Decode a non-interlaced 8-bit RGB/RGBA/grey PNG to (width, height, channels, rows).

    Small helper so tests and metrics can read screenshots without Pillow.
    ``rows`` is a list of ``bytearray``, each ``width * channels`` long.
    """
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, []
    width = height = None
    colour_type = None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        payload = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", payload)
            if depth != 8 or interlace != 0 or colour_type not in (0, 2, 4, 6):
                raise ValueError("unsupported PNG flavour")
        elif kind == b"IDAT":
            idat.append(payload)
        elif kind == b"IEND":
            break
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour_type]
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    i = 0
    for _ in range(height):
        ftype = raw[i]
        line = bytearray(raw[i + 1 : i + 1 + stride])
        i += 1 + stride
        if ftype == 1:
            for x in range(channels, stride):
                line[x] = (line[x] + line[x - channels]) & 0xFF
        elif ftype == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 0xFF
        elif ftype == 3:
            for x in range(stride):
                left = line[x - channels] if x >= channels else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 0xFF
        elif ftype == 4:
            for x in range(stride):
                a = line[x - channels] if x >= channels else 0
                b = prev[x]
                c = prev[x - channels] if x >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        rows.append(line)
        prev = line
    return width, height, channels, rows


def png_size(data: bytes) -> Tuple[int, int]:
    """(width, height) from a PNG header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Fill the offline asset cache for page rendering.")
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="cache directory (default: $SWEET_RL_ASSETS or ~/.cache/sweet_rl/assets)",
    )
    args = parser.parse_args(argv)
    try:
        path = fetch_tailwind(args.cache_dir)
    except (AssetsMissing, subprocess.TimeoutExpired, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Tailwind {TAILWIND_VERSION}: {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
