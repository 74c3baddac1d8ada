"""CLIP image similarity between rendered pages: the frontend reward.

The benchmark scores a final page by the cosine similarity of its CLIP ViT-B/32 image embedding
(OpenAI weights) with the reference page's. Models come from ``open_clip``; the preprocessing is
done here with PIL and torch so that both crops share one code path:

* ``center`` (the original's): resize the short side to the model's input size with bicubic
  resampling, then cut the centred square. On a tall page this sees only its middle.
* ``squash``: resize the whole page to the square input, so every part of the page counts.

A missing picture (no answer, a failed render) is scored as an all-black image; every uniformly
black picture preprocesses to the same tensor whatever its size, so :data:`BLACK_SIZE` only
follows the original (224 x 224) and keeps the image small.

torch, numpy, PIL and open_clip are imported inside the functions so that importing this module
(and ``--help`` of the scripts) stays instant.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

logger = logging.getLogger(__name__)

CROPS = ("center", "squash")
BLACK_SIZE = (224, 224)
NO_WEIGHTS = ("none", "")  # --clip_pretrained values meaning "random weights"

# An image source: a PIL image, a path to a picture, or None for "missing" (scored black).
Source = Union[None, str, Any]


def resize_plan(
    width: int, height: int, size: int, crop: str
) -> Tuple[Tuple[int, int], Tuple[int, int, int, int]]:
    """Where a ``width`` x ``height`` picture is resized to and which box of it is kept.

    Returns ``((new_width, new_height), (left, top, right, bottom))``. ``center`` scales the
    short side to ``size`` (the long side is truncated, as the original's CLIP processor does)
    and keeps the centred ``size`` square, rounding its offset down; ``squash`` scales both
    sides to ``size`` and keeps everything.
    """
    if width < 1 or height < 1:
        raise ValueError(f"empty picture ({width} x {height})")
    if crop == "squash":
        return (size, size), (0, 0, size, size)
    if crop != "center":
        raise ValueError(f"crop must be one of {CROPS}, got {crop!r}")
    if width <= height:
        new_w, new_h = size, max(size, int(size * height / width))
    else:
        new_w, new_h = max(size, int(size * width / height)), size
    left, top = (new_w - size) // 2, (new_h - size) // 2
    return (new_w, new_h), (left, top, left + size, top + size)


def black_image():
    from PIL import Image

    return Image.new("RGB", BLACK_SIZE, (0, 0, 0))


def open_image(source: Source):
    """A source as an RGB PIL image; ``None`` becomes the black picture."""
    from PIL import Image

    if source is None:
        return black_image()
    if isinstance(source, (str, os.PathLike)):
        with Image.open(source) as image:
            return image.convert("RGB")  # drops alpha, as the original's processor did
    return source.convert("RGB")


def preprocess(image, size: int, mean: Sequence[float], std: Sequence[float], crop: str):
    """PIL image -> normalised float tensor ``[3, size, size]``."""
    import numpy as np
    import torch
    from PIL import Image

    image = image.convert("RGB")
    new_size, box = resize_plan(image.width, image.height, size, crop)
    if new_size != image.size:
        image = image.resize(new_size, Image.BICUBIC)
    image = image.crop(box)
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32).copy())  # [S, S, 3] in 0..255
    pixels = pixels.permute(2, 0, 1) / 255.0  # [3, S, S] in 0..1
    mean_t = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)
    return (pixels - mean_t) / std_t  # [3, S, S]


def cosine(a, b):
    """Row-wise cosine of already L2-normalised embeddings ``[N, D]`` x ``[N, D]`` -> ``[N]``.

    Clamped to [-1, 1]: rounding can push the dot product of a unit vector with itself a hair
    above 1.
    """
    return (a * b).sum(dim=-1).clamp(-1.0, 1.0)  # [N]


@dataclass
class ClipScorer:
    """An open_clip model with the preprocessing settings it needs."""

    model: Any
    size: int
    mean: Tuple[float, ...]
    std: Tuple[float, ...]
    crop: str
    device: str
    settings: str  # "model|weights|crop": what produced a reward (kept beside it in the file)

    def embed(self, sources: Sequence[Source], batch_size: int = 32, progress: bool = False):
        """L2-normalised image embeddings ``[N, D]`` (float32, on the CPU).

        Pictures are opened one batch at a time, so a long list of full-page screenshots never
        sits in memory at once.
        """
        import torch
        import torch.nn.functional as F
        from tqdm import tqdm

        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        chunks: List[Any] = []
        starts = range(0, len(sources), batch_size)
        for start in tqdm(starts, desc="clip", unit="batch", disable=not progress):
            batch = [preprocess(open_image(s), self.size, self.mean, self.std, self.crop)
                     for s in sources[start:start + batch_size]]
            pixels = torch.stack(batch).to(self.device)  # [B, 3, S, S]
            with torch.no_grad():
                features = self.model.encode_image(pixels).float()  # [B, D]
            chunks.append(F.normalize(features, dim=-1).cpu())  # [B, D], unit rows
        if not chunks:
            dim = getattr(self.model.visual, "output_dim", 0)
            return torch.zeros(0, dim)
        return torch.cat(chunks)  # [N, D]

    def similarity(
        self, first: Sequence[Source], second: Sequence[Source], batch_size: int = 32
    ) -> List[float]:
        """Cosine similarity of ``first[i]`` with ``second[i]`` for every i."""
        if len(first) != len(second):
            raise ValueError(f"{len(first)} pictures against {len(second)}")
        return cosine(self.embed(first, batch_size), self.embed(second, batch_size)).tolist()


def settings_tag(model_name: str, pretrained: Optional[str], crop: str, seed: int = 0) -> str:
    """What a reward was computed with; random weights name their seed (it decides them)."""
    weights = pretrained if pretrained not in (None, *NO_WEIGHTS) else f"none(seed={seed})"
    return f"{model_name}|{weights}|{crop}"


def tag_wants_quick_gelu(model_name: str, weights: Optional[str]) -> bool:
    """Whether the weights were trained with QuickGELU (from open_clip's tag table; no download).

    Random weights and local files: False (name a ``-quickgelu`` model for such a file)."""
    import open_clip

    if weights is None or os.path.isfile(weights):
        return False
    tag_cfg = open_clip.get_pretrained_cfg(model_name, weights)
    if not tag_cfg:
        tags = open_clip.list_pretrained_tags_by_model(model_name)
        raise ValueError(
            f"--clip_pretrained {weights!r} is neither a file nor a tag of {model_name} "
            f"(tags: {', '.join(tags) or 'none'}; or 'none' for random weights)"
        )
    return bool(tag_cfg.get("quick_gelu", False))


def load_clip(
    model_name: str = "ViT-B-32",
    pretrained: Optional[str] = "openai",
    crop: str = "center",
    device: Optional[str] = None,
    seed: int = 0,
) -> ClipScorer:
    """Build an open_clip model for scoring.

    ``pretrained`` is an open_clip tag (``openai``: downloaded from the hub on first use), a
    local checkpoint file, or ``none``/``None`` for random weights drawn with ``seed`` (tests).
    Weights trained with QuickGELU (OpenAI's) get that activation, as the original's
    transformers CLIP had; open_clip's plain ``ViT-B-32`` config would otherwise use GELU with
    them. A local file of such weights needs the ``-quickgelu`` model name instead.
    """
    import open_clip
    import torch

    if crop not in CROPS:
        raise ValueError(f"--crop must be one of {CROPS}, got {crop!r}")
    if model_name not in open_clip.list_models():
        raise ValueError(f"--clip_model {model_name!r} is not an open_clip model "
                         f"(see open_clip.list_models(), e.g. ViT-B-32)")
    weights = (
        None if pretrained is None or str(pretrained).lower() in NO_WEIGHTS else str(pretrained)
    )
    quick_gelu = tag_wants_quick_gelu(model_name, weights)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    # Random initialisation draws from the global generator: fork it so the caller's stream is
    # left as it was and the same seed always gives the same weights.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            model, _, _ = open_clip.create_model_and_transforms(
                model_name, pretrained=weights, force_quick_gelu=quick_gelu, device=device)
        except RuntimeError as err:
            if weights is None or os.path.isfile(weights) or "download" not in str(err).lower():
                raise
            # No hub access (an offline machine): say what to do instead of a traceback.
            raise ValueError(
                f"cannot fetch the {weights!r} weights of {model_name}: {err}. Offline, pass "
                "a local checkpoint file with --clip_pretrained PATH"
            ) from None
    model.eval()
    cfg = model.visual.preprocess_cfg
    size = cfg["size"]
    if isinstance(size, (tuple, list)):
        if size[0] != size[1]:
            raise ValueError(
                f"{model_name} takes {size[0]} x {size[1]} inputs; only square inputs are supported"
            )
        size = size[0]
    logger.info(
        "CLIP %s (%s) on %s, input %d, crop %s",
        model_name,
        weights or f"random, seed {seed}",
        device,
        size,
        crop,
    )
    return ClipScorer(
        model=model,
        size=int(size),
        mean=tuple(cfg["mean"]),
        std=tuple(cfg["std"]),
        crop=crop,
        device=device,
        settings=settings_tag(model_name, weights, crop, seed),
    )
