"""Build a tiny Qwen2-VL vision-language model with a locally trained tokenizer — no download.

The frontend simulator of the paper is Qwen2-VL-72B-Instruct. This builds the same
architecture (``Qwen2VLForConditionalGeneration`` with a ``Qwen2VLProcessor``) at toy size and
with random weights, so the in-process simulator runs the real image path — data-URL images
through the Qwen2-VL image processor into vision tokens — on the CPU in the demo and the tests.
Its replies are gibberish.

The tokenizer is a byte-level BPE trained in about a second on the bundled prompts and sample
tasks, with Qwen2-VL's special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|vision_start|>``,
``<|image_pad|>``, ...) and a ChatML template that turns every image part into
``<|vision_start|><|image_pad|><|vision_end|>``, as Qwen2-VL's own template does. ``max_pixels``
is small, so a page screenshot becomes at most a few dozen image tokens (one per 28x28 px
after resizing).

    python -m sweet_rl.models.tiny_vlm outputs/tiny-qwen2-vl
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import Options, flag

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
VISION_START, VISION_END = "<|vision_start|>", "<|vision_end|>"
IMAGE_PAD, VIDEO_PAD = "<|image_pad|>", "<|video_pad|>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD]

# ChatML, with image parts (OpenAI "image_url" or transformers "image") as vision placeholders.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ('image', 'image_url') %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

PATCH = 14  # Qwen2-VL: 14x14 px patches, 2x2 of them merged into one token (28x28 px)
MERGE = 2


def build_tokenizer(vocab_size: int = 1024):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from sweet_rl.models.tiny_model import _training_text

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    core.train_from_iterator(_training_text(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=IM_END, pad_token=PAD,
                                        additional_special_tokens=SPECIAL_TOKENS[1:])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_vlm(output_dir: str, seed: int = 0, vocab_size: int = 1024,
                   hidden_size: int = 64, num_layers: int = 2, vision_dim: int = 32,
                   max_pixels: int = (PATCH * MERGE) ** 2 * 16,
                   max_position_embeddings: int = 16384) -> str:
    """Write a tiny random Qwen2-VL model and its processor to ``output_dir``; return it.

    ``max_pixels`` bounds each image after resizing: the default gives at most 16 image tokens.
    """
    import torch
    from transformers import (GenerationConfig, Qwen2VLConfig, Qwen2VLForConditionalGeneration,
                              Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor)

    tokenizer = build_tokenizer(vocab_size)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    heads = 4
    half_head = hidden_size // heads // 2
    # Multimodal rotary sections (time, height, width) must add up to half the head size.
    mrope = [half_head - 2 * (half_head // 3), half_head // 3, half_head // 3]
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
            num_hidden_layers=num_layers, num_attention_heads=heads, num_key_value_heads=2,
            max_position_embeddings=max_position_embeddings,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "mrope_section": mrope},
            bos_token_id=None, eos_token_id=ids[IM_END], pad_token_id=ids[PAD]),
        vision_config=dict(depth=1, embed_dim=vision_dim, hidden_size=hidden_size, num_heads=2,
                           mlp_ratio=2, patch_size=PATCH, spatial_merge_size=MERGE,
                           temporal_patch_size=2),
        image_token_id=ids[IMAGE_PAD], video_token_id=ids[VIDEO_PAD],
        vision_start_token_id=ids[VISION_START], vision_end_token_id=ids[VISION_END],
        tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(eos_token_id=[ids[IM_END], ids[PAD]],
                                               pad_token_id=ids[PAD])
    images = Qwen2VLImageProcessor(min_pixels=(PATCH * MERGE) ** 2 * 4, max_pixels=max_pixels,
                                   patch_size=PATCH, merge_size=MERGE)
    processor = Qwen2VLProcessor(image_processor=images, tokenizer=tokenizer,
                                 video_processor=Qwen2VLVideoProcessor(),
                                 chat_template=CHAT_TEMPLATE)
    os.makedirs(output_dir, exist_ok=True)
    model.save_pretrained(output_dir)
    processor.save_pretrained(output_dir)
    return output_dir


def ensure_tiny_vlm(output_dir: Optional[str] = None, seed: int = 0) -> str:
    """The tiny VLM, built once into the per-user cache (see ``tiny_model.ensure_built``)."""
    from sweet_rl.models.tiny_model import ensure_built

    return ensure_built(build_tiny_vlm, "tiny-qwen2-vl", output_dir, seed)


@dataclass(kw_only=True)
class TinyVLMOptions(Options):
    """Build the tiny Qwen2-VL (random weights) into OUTPUT_DIR."""

    POSITIONAL = ("output_dir", "seed")
    output_dir: str = flag("the model folder to write.", "outputs/tiny-qwen2-vl")
    seed: int = flag("the seed of its random weights.", 0)


def write_tiny_vlm(opts: TinyVLMOptions) -> str:
    path = build_tiny_vlm(opts.output_dir, seed=opts.seed)
    print(f"tiny vision-language model written to {path}")
    return path


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(write_tiny_vlm, TinyVLMOptions, argv)


if __name__ == "__main__":
    main()
