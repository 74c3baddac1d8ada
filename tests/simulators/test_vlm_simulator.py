"""The vision-language simulator: the tiny Qwen2-VL built offline and run in-process, and the
HTTP path carrying the same image messages to an OpenAI-compatible server."""

from __future__ import annotations

import base64
import json
import os

import pytest

from sweet_rl.rendering import assets as page_assets
from sweet_rl.stages.factory import build_simulator
from sweet_rl.stages.simulate_options import SimulatorOptions
from sweet_rl.models.chat_images import decode_data_url, image_part, png_data_url, text_part
from sweet_rl.simulators.local_vlm_simulator import LocalVLMSimulator, split_images
from sweet_rl.simulators.openai_simulator import OpenAISimulator
from sweet_rl.models.tiny_vlm import IMAGE_PAD, build_tiny_vlm
from tests.simulators.fake_openai_server import FakeOpenAIServer


def solid_png(width, height, rgb) -> bytes:
    return page_assets.encode_png(width, height, [bytes(rgb) * width] * height)


PAGE = solid_png(1280, 2400, (239, 68, 68))  # a tall page, as the renderer makes them
REFERENCE = page_assets.placeholder_png(1280, 800)


def conversation(agent_png=None):
    parts = [text_part("Compare the pages and say what differs.")]
    if agent_png is None:
        parts.append(text_part("The assistant did not show you a page."))
    else:
        parts += [text_part("Its page:"), image_part(agent_png)]
    parts += [text_part("The page you want:"), image_part(REFERENCE)]
    return [{"role": "user", "content": parts}]


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> str:
    return build_tiny_vlm(str(tmp_path_factory.mktemp("tiny-vlm")), seed=0)


@pytest.fixture(scope="module")
def simulator(tiny_vlm):
    sim = LocalVLMSimulator(tiny_vlm, max_new_tokens=12, device="cpu", batch_size=2)
    yield sim
    sim.close()


def test_split_images_keeps_order_and_refuses_remote_urls():
    messages, images = split_images(conversation(PAGE))
    assert images == [PAGE, REFERENCE]
    assert [p["type"] for p in messages[0]["content"]] == ["text", "text", "image", "text", "image"]
    assert split_images([{"role": "user", "content": "plain"}]) == (
        [{"role": "user", "content": "plain"}], [])
    remote = [{"role": "user", "content": [{"type": "image_url",
                                            "image_url": {"url": "https://example.com/a.png"}}]}]
    with pytest.raises(ValueError, match="data:image"):
        split_images(remote)


def test_tiny_vlm_is_a_real_qwen2_vl_built_offline(tiny_vlm):
    config = json.load(open(os.path.join(tiny_vlm, "config.json")))
    assert config["architectures"] == ["Qwen2VLForConditionalGeneration"]
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_vlm)
    assert type(processor).__name__ == "Qwen2VLProcessor"
    prompt = processor.apply_chat_template(split_images(conversation(PAGE))[0], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.count("<|vision_start|><|image_pad|><|vision_end|>") == 2
    assert prompt.endswith("<|im_start|>assistant\n")


def test_images_reach_the_model_as_few_vision_tokens(simulator):
    import torch

    prompt = simulator.processor.apply_chat_template(split_images(conversation(PAGE))[0],
                                                     tokenize=False, add_generation_prompt=True)
    from PIL import Image

    def batch(color):
        page = Image.new("RGB", (1280, 2400), color)
        return simulator._inputs([prompt], [page, Image.new("RGB", (1280, 800), "white")])

    red, blue = batch((239, 68, 68)), batch((30, 60, 220))
    grid = red["image_grid_thw"]  # [2 images, (t, h, w) patches]
    pad_id = simulator.processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    image_tokens = int((red["input_ids"] == pad_id).sum())
    assert image_tokens == int(grid.prod(dim=1).sum()) // 4 and image_tokens <= 32
    assert torch.equal(red["input_ids"], blue["input_ids"])
    with torch.no_grad():
        logits_red = simulator.model(**red).logits[0, -1]  # [vocab]
        logits_blue = simulator.model(**blue).logits[0, -1]
    assert not torch.allclose(logits_red, logits_blue)  # the picture changes the answer


def test_local_simulator_answers_a_batch_greedily(simulator):
    batch = [conversation(PAGE), conversation(None)]
    first = simulator.reply_batch(batch)
    second = simulator.reply_batch(batch)
    assert len(first) == 2 and all(r.error is None and isinstance(r.text, str) for r in first)
    assert [r.text for r in first] == [r.text for r in second]
    # Alone or in a batch of two, a conversation gets the same greedy reply.
    assert simulator.reply_batch([conversation(None)])[0].text == first[1].text


def test_a_conversation_beyond_the_context_is_rejected_not_truncated(simulator):
    limit = simulator.max_length
    simulator.max_length = 40
    try:
        [reply] = simulator.reply_batch([conversation(PAGE)])
    finally:
        simulator.max_length = limit
    assert reply.text is None and "context too long" in reply.error


def test_factory_picks_the_vlm_for_html_without_hostname(tiny_vlm):
    sim = build_simulator(SimulatorOptions(env_model=tiny_vlm, simulator_max_tokens=4,
                                           device="cpu"), task_type="html")
    try:
        assert isinstance(sim, LocalVLMSimulator)
    finally:
        sim.close()


def test_http_simulator_sends_the_parts_unchanged():
    messages = conversation(PAGE)
    with FakeOpenAIServer([], models=("Qwen/Qwen2-VL-72B-Instruct",)) as server:
        sim = build_simulator(SimulatorOptions(hostname=server.base_url, port=0,
                                               env_model="Qwen/Qwen2-VL-72B-Instruct"),
                              task_type="html")
        assert isinstance(sim, OpenAISimulator)
        [reply] = sim.reply_batch([messages])
        sim.close()
    assert reply.error is None and reply.text.startswith("echo: ")
    [body] = server.requests
    assert body["messages"] == messages and body["temperature"] == 0.0
    urls = [p["image_url"]["url"] for p in body["messages"][0]["content"]
            if p["type"] == "image_url"]
    assert [decode_data_url(u) for u in urls] == [PAGE, REFERENCE]
    assert all(page_assets.decode_png(decode_data_url(u))[0] == 1280 for u in urls)


def test_large_images_can_be_downscaled_before_sending():
    url = png_data_url(PAGE, max_side=600)
    small = base64.b64decode(url.split(",", 1)[1])
    assert page_assets.png_size(small) == (320, 600)  # aspect kept
    width, height, channels, rows = page_assets.decode_png(small)
    assert tuple(rows[300][300 * channels:300 * channels + 3]) == (239, 68, 68)
    assert png_data_url(REFERENCE, max_side=2000) == png_data_url(REFERENCE)  # small: untouched
