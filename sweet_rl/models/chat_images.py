"""Images inside chat messages: PNG bytes <-> ``data:image/png;base64,...`` URL parts.

The vision-language simulator receives the OpenAI chat format, where a message's ``content``
is a list of parts ``{"type": "text", "text": ...}`` and ``{"type": "image_url", "image_url":
{"url": ...}}``. Images travel inline as base64 data URLs, which both vLLM's and OpenAI's
chat endpoints accept, so no file server is needed. The frontend environment builds these
parts and the in-process simulator decodes them, so the helpers sit below both packages.

Large pages: a full page screenshot is 1280 px wide and up to 8000 px tall (the renderer's
clip). What the servers do with it:

* vLLM runs the model's own Hugging Face image processor. For Qwen2-VL (the paper's frontend
  simulator is Qwen2-VL-72B-Instruct) that keeps the aspect ratio and only shrinks images
  above ``max_pixels`` (12,845,056 px in the released processor config), at one token per
  28x28 px: a 1280x8000 page costs about 13,000 tokens, two of them fill most of a 32k
  context. ``vllm serve ... --mm-processor-kwargs '{"max_pixels": N}'`` lowers that.
* The OpenAI API scales an image (``detail: high``) to fit in 2048x2048 and then its short
  side to at most 768 px before tiling it; ``detail: low`` sees 512x512. A tall page thus
  loses most of its detail there whatever we send.

``max_side`` shrinks an image (aspect kept, Lanczos) whose longer side exceeds it before it is
encoded, so the request stays small and the token cost predictable on any server.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Dict, Optional

PNG_DATA_PREFIX = "data:image/png;base64,"


def downscale_png(png: bytes, max_side: Optional[int]) -> bytes:
    """``png`` itself, or re-encoded so that neither side exceeds ``max_side`` pixels."""
    if not max_side:
        return png
    from sweet_rl.rendering.assets import png_size

    width, height = png_size(png)
    if max(width, height) <= max_side:
        return png
    from PIL import Image

    scale = max_side / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    with Image.open(io.BytesIO(png)) as image:
        small = image.convert("RGB").resize(size, Image.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue()


def png_data_url(png: bytes, max_side: Optional[int] = None) -> str:
    return PNG_DATA_PREFIX + base64.b64encode(downscale_png(png, max_side)).decode("ascii")


def image_part(png: bytes, max_side: Optional[int] = None) -> Dict[str, object]:
    """An OpenAI ``image_url`` content part carrying ``png`` inline."""
    return {"type": "image_url", "image_url": {"url": png_data_url(png, max_side)}}


def text_part(text: str) -> Dict[str, object]:
    return {"type": "text", "text": text}


def decode_data_url(url: str) -> bytes:
    """The bytes of a ``data:image/...;base64,`` URL; anything else is a ValueError.

    The in-process simulator only takes inline images: fetching URLs would let a message
    reach the network.
    """
    if not url.startswith("data:image/") or ";base64," not in url[:64]:
        raise ValueError(f"only base64 data:image/ URLs are supported here, got {url[:40]!r}")
    try:
        return base64.b64decode(url.split(",", 1)[1], validate=True)
    except binascii.Error as err:
        raise ValueError(f"bad base64 in image data URL: {err}") from err
