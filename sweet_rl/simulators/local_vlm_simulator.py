"""The in-process vision-language simulator: a local transformers image-text-to-text model.

The frontend default when no ``--hostname`` is given (the embedded tiny Qwen2-VL, see
:mod:`sweet_rl.models.tiny_vlm`); any local Qwen2-VL-style checkpoint works the same way. It takes
the OpenAI message format the HTTP simulator sends — ``content`` as a list of text and
``image_url`` parts with PNG data URLs — and answers greedily.

A conversation longer than the model's context gets ``SimulatorReply(text=None, error=...)``,
as an HTTP server's 400 would, so only that dialogue ends.
"""

from __future__ import annotations

import io
from typing import Dict, List, Optional, Sequence, Tuple

from sweet_rl.models.chat_images import decode_data_url
from sweet_rl.simulators.base import DialogueKeys, Simulator
from sweet_rl.types import ChatMessages, SimulatorReply


def split_images(conversation: ChatMessages) -> Tuple[List[Dict[str, object]], List[bytes]]:
    """Messages with each image part replaced by ``{"type": "image"}`` (the processor's
    placeholder) and the image bytes in order of appearance. Plain-string contents stay."""
    messages: List[Dict[str, object]] = []
    images: List[bytes] = []
    for message in conversation:
        content = message.get("content", "")
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": part.get("text", "")})
            elif kind == "image_url":
                image = part.get("image_url")
                url = image.get("url", "") if isinstance(image, dict) else str(image or "")
                images.append(decode_data_url(url))
                parts.append({"type": "image"})
            else:
                raise ValueError(f"unsupported message part type {kind!r}")
        messages.append({"role": message["role"], "content": parts})
    return messages, images


class LocalVLMSimulator(Simulator):
    name = "local-vlm"

    def __init__(self, model_path: str, max_new_tokens: int = 256, device: Optional[str] = None,
                 dtype: str = "auto", batch_size: int = 4):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from sweet_rl.models.hf_generation import pick_device, stop_token_ids

        self.device = pick_device(device)
        self.processor = AutoProcessor.from_pretrained(model_path)
        self.processor.tokenizer.padding_side = "left"  # generation continues on the right
        if dtype == "auto":
            # bf16 on GPUs that have it; float32 on the CPU, where bf16 matmuls are slow.
            use_bf16 = self.device.startswith("cuda") and torch.cuda.is_bf16_supported()
            torch_dtype = torch.bfloat16 if use_bf16 else torch.float32
        else:
            torch_dtype = getattr(torch, dtype)
        self.model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch_dtype)
        self.model.to(self.device).eval()
        self.max_new_tokens = max_new_tokens
        self.batch_size = max(1, batch_size)
        self.stop_ids = stop_token_ids(self.processor.tokenizer)
        text_config = getattr(self.model.config, "text_config", self.model.config)
        self.max_length = getattr(text_config, "max_position_embeddings", None)

    def _inputs(self, prompts: Sequence[str], pictures: Sequence[object]):
        return self.processor(text=list(prompts), images=list(pictures) or None, padding=True,
                              return_tensors="pt")

    def _fits(self, prompt: str, images: Sequence[object]) -> Optional[str]:
        """None when the conversation fits the context with room to answer, else why not."""
        if self.max_length is None:
            return None
        length = int(self._inputs([prompt], images)["input_ids"].shape[1])
        if length + self.max_new_tokens > self.max_length:
            return (f"context too long: {length} prompt tokens + {self.max_new_tokens} new "
                    f"> {self.max_length}")
        return None

    def reply_batch(self, conversations: List[ChatMessages],
                    keys: DialogueKeys = None) -> List[SimulatorReply]:
        import torch
        from PIL import Image

        prepared = []
        for conversation in conversations:
            messages, images = split_images(conversation)
            prompt = self.processor.apply_chat_template(messages, tokenize=False,
                                                        add_generation_prompt=True)
            # Our own screenshots (the renderer bounds their size), decoded only here.
            pictures = [Image.open(io.BytesIO(data)).convert("RGB") for data in images]
            prepared.append((prompt, pictures))
        replies: List[Optional[SimulatorReply]] = [None] * len(prepared)
        runnable = []
        for index, (prompt, images) in enumerate(prepared):
            problem = self._fits(prompt, images)
            if problem is None:
                runnable.append(index)
            else:
                replies[index] = SimulatorReply(text=None, error=problem)
        for start in range(0, len(runnable), self.batch_size):
            chunk = runnable[start:start + self.batch_size]
            batch = self._inputs([prepared[i][0] for i in chunk],
                                 [pic for i in chunk for pic in prepared[i][1]]).to(self.device)
            with torch.no_grad():
                generated = self.model.generate(
                    **batch, do_sample=False, max_new_tokens=self.max_new_tokens,
                    eos_token_id=self.stop_ids,
                    pad_token_id=self.processor.tokenizer.pad_token_id)  # [B, prompt+new]
            new_tokens = generated[:, batch["input_ids"].shape[1]:]  # [B, new]
            texts = self.processor.batch_decode(new_tokens, skip_special_tokens=True)
            for index, text in zip(chunk, texts):
                replies[index] = SimulatorReply(text=text)
        return replies

    def close(self) -> None:
        self.model = None
