"""CLIP similarity with real open_clip models built with random weights (nothing is downloaded).

The scoring model is the default ViT-B-32 (random weights build in under a second). The
checkpoint round trip uses ViT-S-32, open_clip's smaller ViT with the same 32-pixel patches,
so the file written is about 250 MB instead of 600 MB.
"""

import dataclasses
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")
from PIL import Image, ImageDraw  # noqa: E402

from sweet_rl.evaluation.clip_similarity import (  # noqa: E402
    BLACK_SIZE,
    cosine,
    load_clip,
    preprocess,
    resize_plan,
    settings_tag,
    tag_wants_quick_gelu,
)


@pytest.fixture(scope="module")
def scorer():
    return load_clip("ViT-B-32", pretrained="none", crop="center", device="cpu", seed=0)


def page(width, height, seed):
    """A synthetic 'page': white background with coloured bands and boxes."""
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    rng = random.Random(seed)
    for top in range(0, height, max(1, height // 12)):
        colour = tuple(rng.randrange(256) for _ in range(3))
        left = rng.randrange(max(1, width // 2))
        draw.rectangle([left, top, left + width // 3, top + height // 30 + 5], fill=colour)
    return image


def test_resize_plan_by_hand():
    # A 1280 x 8000 page: short side 1280 -> 224, long side int(224 * 8000 / 1280) = 1400;
    # the centre square starts at (1400 - 224) // 2 = 588.
    assert resize_plan(1280, 8000, 224, "center") == ((224, 1400), (0, 588, 224, 812))
    # Landscape: int(224 * 1000 / 300) = 746, left offset (746 - 224) // 2 = 261.
    assert resize_plan(1000, 300, 224, "center") == ((746, 224), (261, 0, 485, 224))
    assert resize_plan(1280, 8000, 224, "squash") == ((224, 224), (0, 0, 224, 224))
    for crop in ("center", "squash"):
        assert resize_plan(500, 500, 224, crop) == ((224, 224), (0, 0, 224, 224))
    with pytest.raises(ValueError):
        resize_plan(10, 10, 224, "letterbox")


def test_preprocess_normalises_with_the_model_mean_and_std(scorer):
    # A uniform picture of value v in every channel becomes (v / 255 - mean) / std everywhere.
    grey = Image.new("RGB", (300, 700), (128, 128, 128))
    pixels = preprocess(grey, scorer.size, scorer.mean, scorer.std, "center")
    assert tuple(pixels.shape) == (3, 224, 224)
    for channel in range(3):
        expected = (128 / 255 - scorer.mean[channel]) / scorer.std[channel]
        assert torch.allclose(pixels[channel], torch.full((224, 224), expected), atol=1e-6)
    # The model's preprocess config is OpenAI CLIP's.
    assert scorer.mean == pytest.approx((0.48145466, 0.4578275, 0.40821073))


def test_identical_images_score_one(scorer, tmp_path):
    a = page(640, 1500, seed=1)
    path = tmp_path / "a.png"
    a.save(path)
    # The same picture as an image object, a copy, and a file on disk.
    scores = scorer.similarity([a, a.copy(), str(path)], [str(path), a, a])
    assert scores == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)


def test_scores_lie_in_range_and_black_is_handled(scorer):
    pictures = [page(800, 1200, seed=1), page(1280, 900, seed=2), None,
                Image.new("RGB", (1280, 900), "white"), Image.new("RGB", (1280, 4000), (0, 0, 0))]
    embeddings = scorer.embed(pictures, batch_size=2)  # three batches: 2, 2, 1
    assert tuple(embeddings.shape) == (5, scorer.model.visual.output_dim)
    assert torch.isfinite(embeddings).all()
    assert torch.allclose(embeddings.norm(dim=-1), torch.ones(5), atol=1e-5)  # unit rows
    for i in range(5):  # every picture against every other
        scores = cosine(embeddings[i].expand(5, -1), embeddings)
        assert torch.isfinite(scores).all() and scores.min() >= -1.0 and scores.max() <= 1.0
        assert scores[i] == pytest.approx(1.0, abs=1e-5)
    # A missing picture is black: any all-black image is the same picture to CLIP.
    assert torch.allclose(embeddings[2], embeddings[4], atol=1e-6)
    assert BLACK_SIZE == (224, 224)
    # The pages, white and black are told apart.
    assert len({round(float(s), 3) for s in cosine(embeddings[0].expand(5, -1), embeddings)}) >= 4


def test_batched_scores_equal_one_at_a_time(scorer):
    first = [page(700, 900 + 300 * s, seed=s) for s in range(3)]
    second = [page(1280, 800, seed=10), page(1280, 2000, seed=11), None]
    batched = scorer.similarity(first, second, batch_size=3)
    single = [scorer.similarity([a], [b], batch_size=1)[0] for a, b in zip(first, second)]
    assert batched == pytest.approx(single, abs=1e-5)
    assert len(set(round(s, 4) for s in batched)) > 1  # real, different scores


def test_center_and_squash_differ_on_a_tall_page_and_match_on_a_square_one(scorer):
    squash = dataclasses.replace(scorer, crop="squash")
    # Two tall pages with the same middle and different tops: the centre crop sees only the
    # middle, so it calls them identical; squashing sees the whole page.
    middle = page(640, 640, seed=3)
    tall_a, tall_b = page(640, 3000, seed=4), page(640, 3000, seed=5)
    for tall in (tall_a, tall_b):
        tall.paste(middle, (0, (3000 - 640) // 2))
    box = resize_plan(640, 3000, 224, "center")[1]
    assert box[1] > 0
    assert scorer.similarity([tall_a], [tall_b]) == pytest.approx([1.0], abs=1e-5)
    assert squash.similarity([tall_a], [tall_b])[0] < 0.9999
    assert not torch.allclose(scorer.embed([tall_a]), squash.embed([tall_a]), atol=1e-4)
    # On a square page both crops resize the same way: the same tensor, the same embedding.
    square = page(600, 600, seed=6)
    assert torch.equal(preprocess(square, 224, scorer.mean, scorer.std, "center"),
                       preprocess(square, 224, scorer.mean, scorer.std, "squash"))
    assert torch.allclose(scorer.embed([square]), squash.embed([square]), atol=1e-6)


def test_same_seed_same_weights_and_settings_tag():
    a = load_clip("ViT-S-32", pretrained="none", device="cpu", seed=3)
    b = load_clip("ViT-S-32", pretrained=None, device="cpu", seed=3)
    for (name, pa), (_, pb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(pa, pb), name
    assert a.settings == "ViT-S-32|none(seed=3)|center"
    assert settings_tag("ViT-B-32", "openai", "squash") == "ViT-B-32|openai|squash"


def test_local_checkpoint_gives_the_same_embeddings(tmp_path):
    saved = load_clip("ViT-S-32", pretrained="none", device="cpu", seed=1)
    checkpoint = tmp_path / "random_vit_s_32.pt"
    torch.save(saved.model.state_dict(), checkpoint)
    # Another seed first: if the file were ignored the weights would differ.
    loaded = load_clip("ViT-S-32", pretrained=str(checkpoint), device="cpu", seed=2)
    other = load_clip("ViT-S-32", pretrained="none", device="cpu", seed=2)
    pictures = [page(900, 1400, seed=8), None]
    expected = saved.embed(pictures)
    assert torch.allclose(loaded.embed(pictures), expected, atol=1e-6)
    assert not torch.allclose(other.embed(pictures), expected, atol=1e-3)
    assert loaded.settings == f"ViT-S-32|{checkpoint}|center"
    checkpoint.unlink()


def test_openai_weights_get_quick_gelu(tmp_path):
    # OpenAI's CLIP was trained with QuickGELU (the original's transformers model uses it too);
    # open_clip's plain ViT-B-32 config would run those weights with GELU. Decided from
    # open_clip's tag table, without downloading anything.
    assert tag_wants_quick_gelu("ViT-B-32", "openai") is True
    assert tag_wants_quick_gelu("ViT-B-32", "laion2b_s34b_b79k") is False
    assert tag_wants_quick_gelu("ViT-B-32", None) is False
    checkpoint = tmp_path / "weights.pt"
    checkpoint.write_bytes(b"")
    assert tag_wants_quick_gelu("ViT-B-32", str(checkpoint)) is False


def test_unknown_model_weights_or_crop_are_refused():
    with pytest.raises(ValueError, match="not an open_clip model"):
        load_clip("ViT-Q-99", pretrained="none", device="cpu")
    with pytest.raises(ValueError, match="neither a file nor a tag"):
        load_clip("ViT-B-32", pretrained="no-such-tag", device="cpu")
    with pytest.raises(ValueError, match="crop"):
        load_clip("ViT-B-32", pretrained="none", crop="letterbox", device="cpu")
