"""The frontend's vision-language critic: a scalar head on a Qwen2-VL that sees the reference page.

The paper's frontend SWEET-RL critic (Zhou et al. 2025, Table 2) is a vision-language model of
the agent's size, Qwen2-VL-7B-Instruct, that reads the dialogue together with the rendered
reference page (the training-time information) and outputs one number; it is trained with the
Bradley-Terry loss on trajectory pairs and ranks each turn's candidates. Its training fork
(collab_openrlhf, ``_get_qwen_reward_model`` and ``QwenRewardModelTrainer``) puts a
``Linear(hidden, 1, bias=False)`` on Qwen2-VL's last hidden states and takes the reward as the
mean of the per-token values over every position, image tokens included; the loss is
``-log sigmoid(r_chosen - r_rejected)``; the inputs are chat messages with an image part, made
into ``input_ids``, ``pixel_values`` and ``image_grid_thw`` by the Qwen2-VL processor.

Here: the same bias-free head on :class:`~sweet_rl.training.heads.ScalarHeadModel`'s mean
pooling, over the attention mask -- visual and text tokens, padding left out (the fork's mean
also ran over its left padding, so a row's reward there depended on its batch). Positions are
the model's own multimodal rotary ones (the fork passed plain 1-D positions).

Its data: VLM critic pairs (:mod:`sweet_rl.training.vlm_pairs`), a reference screenshot and
two dialogues. An item -- (picture, text) -- is one user message, the image then the text, in
the processor's chat template. Too long for ``max_len``: the dialogue loses tokens from its
start (the image and the template never), as the text critics cut from the left. Pictures
are resized by the processor to at most ``max_pixels`` (a 1280x8000 page screenshot would
otherwise be some 13000 image tokens).

Saved as the text heads are (``model.safetensors``: the backbone under the names of Qwen2-VL's
published checkpoints plus ``score_head.weight`` (1, H); ``config.json``), with the processor's
files and ``critic_head.json`` ``{"kind": "vlm_regression", "pooling": "mean", "max_len": N,
"max_pixels": P}``; :func:`load_vlm_critic` reads them back.
"""

from __future__ import annotations

import inspect
from typing import Dict, List, Optional, Sequence, Union

import torch
from torch import nn

from sweet_rl.training.heads import ScalarHeadModel, load_head_model, mean_pool
from sweet_rl.training.vlm_pairs import VLMItem  # (image path, text)

KIND = "vlm_regression"
DEFAULT_MAX_PIXELS = 1280 * 28 * 28  # at most 1280 image tokens (Qwen2-VL: 28x28 px a token)
TEXT_SLOT = "\ue000TEXT\ue000"  # private-use characters: no chat template writes them
TOO_BIG = "raise it, or save the model's processor with a smaller max_pixels"


def _load_image(path: str):
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("RGB")  # screenshots may be RGBA or palette PNGs


class VLMEncoder:
    """(image path, text) -> the critic's token ids and the picture's pixels.

    The chat template is rendered once around a placeholder text; the part before it (with
    the image) goes through the processor, the dialogue and the rest through the tokenizer.
    Both cuts are at special tokens, so this gives the ids the processor would give for the
    whole message, and lets the dialogue alone be cut. The dialogue is tokenised with special
    tokens split: a page that writes ``<|image_pad|>`` stays text and never becomes an image
    slot.
    """

    def __init__(self, processor, max_len: int, max_pixels: Optional[int] = None):
        self.processor, self.tokenizer, self.max_len = processor, processor.tokenizer, max_len
        images = processor.image_processor
        self.merge = int(images.merge_size)
        self.min_pixels = int(images.size["shortest_edge"])
        own_max = int(images.size["longest_edge"])
        self.max_pixels = min(own_max, int(max_pixels)) if max_pixels else own_max
        message = [{"role": "user", "content": [{"type": "image"},
                                                {"type": "text", "text": TEXT_SLOT}]}]
        rendered = processor.apply_chat_template(message, tokenize=False,
                                                 add_generation_prompt=False)
        if rendered.count(TEXT_SLOT) != 1:
            raise ValueError("the processor's chat template does not place the text once")
        self.head, tail = rendered.split(TEXT_SLOT)
        self.tail_ids = self._ids(tail, split=False)
        self.image_token_id = self.tokenizer.convert_tokens_to_ids(processor.image_token)
        # the head's own tokens, its one image placeholder not counted
        self.head_text = len(self._ids(self.head, split=False)) - 1

    def _ids(self, text: str, split: bool = True) -> List[int]:
        return list(self.tokenizer(text, add_special_tokens=False,
                                   split_special_tokens=split)["input_ids"])

    def image_tokens(self, path: str) -> int:
        """How many tokens the picture becomes (read from its size, no pixels decoded)."""
        from PIL import Image

        with Image.open(path) as image:
            width, height = image.size
        bounds = {"min_pixels": self.min_pixels, "max_pixels": self.max_pixels}
        patches = self.processor.image_processor.get_number_of_image_patches(height, width,
                                                                               bounds)
        return patches // self.merge ** 2

    def length(self, item: VLMItem) -> int:
        """The item's encoded length; raises when the picture alone leaves no room."""
        image, text = item
        frame = self.head_text + self.image_tokens(image) + len(self.tail_ids)
        if frame >= self.max_len:
            raise ValueError(f"{image}: the picture and the template take {frame} tokens, "
                             f"--max_len is {self.max_len} ({TOO_BIG})")
        return frame + min(len(self._ids(text)), self.max_len - frame)

    def frame(self, image: str) -> Dict[str, object]:
        """The picture's part of every item that shows it: the template's head with the image
        slots, and the pixels."""
        out = self.processor(text=[self.head], images=[_load_image(image)], return_tensors="pt",
                             add_special_tokens=False,
                             size={"shortest_edge": self.min_pixels,
                                   "longest_edge": self.max_pixels})
        head = out["input_ids"][0].tolist()
        if len(head) + len(self.tail_ids) >= self.max_len:
            raise ValueError(f"{image}: the picture and the template take "
                             f"{len(head) + len(self.tail_ids)} tokens, --max_len is "
                             f"{self.max_len} ({TOO_BIG})")
        return {"head": head,
                "pixel_values": out["pixel_values"],  # (patches, C * temporal * patch^2)
                "image_grid_thw": out["image_grid_thw"]}  # (1, 3)

    def join(self, frame: Dict[str, object], text: str) -> Dict[str, object]:
        """One item from its picture's frame and its text (cut from the left to fit)."""
        room = self.max_len - len(frame["head"]) - len(self.tail_ids)
        ids = frame["head"] + self._ids(text)[-room:] + self.tail_ids
        return {"input_ids": ids, "pixel_values": frame["pixel_values"],
                "image_grid_thw": frame["image_grid_thw"]}

    def __call__(self, item: VLMItem) -> Dict[str, object]:
        return self.join(self.frame(item[0]), item[1])


def vlm_batch(encoded: Sequence[Dict[str, object]], pad_id: int, image_token_id: int
              ) -> Dict[str, torch.Tensor]:
    """Right-pad encoded items into one batch; the pictures are concatenated in row order,
    the order in which the model fills the rows' image slots."""
    width = max(len(e["input_ids"]) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)  # (N, T)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)  # (N, T)
    for row, e in enumerate(encoded):
        ids[row, :len(e["input_ids"])] = torch.tensor(e["input_ids"], dtype=torch.long)
        mask[row, :len(e["input_ids"])] = 1
    types = ((ids == image_token_id) & mask.bool()).long()  # (N, T): 1 on image slots
    return {"input_ids": ids, "attention_mask": mask, "mm_token_type_ids": types,
            "pixel_values": torch.cat([e["pixel_values"] for e in encoded]),  # (P, D)
            "image_grid_thw": torch.cat([e["image_grid_thw"] for e in encoded])}  # (N, 3)


class VLMHeadModel(ScalarHeadModel):
    """A Qwen2-VL backbone (``Qwen2VLModel``: vision tower + language model), the mean of its
    last hidden states over every real token, and a bias-free ``score_head`` (hidden -> 1)."""

    def __init__(self, backbone: nn.Module, seed: int = 0):
        super().__init__(backbone, seed)
        drawn = self.score_head.weight.detach()  # (1, H), drawn from the seed as for text
        self.score_head = nn.Linear(drawn.shape[1], 1, bias=False).to(drawn.dtype)
        with torch.no_grad():
            self.score_head.weight.copy_(drawn)
        # transformers >= 5 takes the image slots explicitly for its rotary positions
        self.pass_types = "mm_token_type_ids" in inspect.signature(backbone.forward).parameters

    def checkpoint_state(self, state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """``state`` under the names of Qwen2-VL's published checkpoints (``visual.*``,
        ``model.layers.*``): transformers reads those into a ``Qwen2VLModel``; it would misread
        the module's own ``model.visual.*`` as part of the language model."""
        renamed = {}
        for key, tensor in state.items():
            for ours, theirs in (("model.visual.", "visual."), ("model.language_model.", "model.")):
                if key.startswith(ours):
                    key = theirs + key[len(ours):]
                    break
            renamed[key] = tensor
        return renamed

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                pixel_values: torch.Tensor, image_grid_thw: torch.Tensor,
                mm_token_type_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        extra = {"mm_token_type_ids": mm_token_type_ids} if self.pass_types else {}
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               pixel_values=pixel_values, image_grid_thw=image_grid_thw,
                               use_cache=False, **extra).last_hidden_state  # (B, T, H)
        pooled = mean_pool(hidden, attention_mask)  # (B, H) float32, image tokens included
        scores = self.score_head(pooled.to(self.score_head.weight.dtype))  # (B, 1)
        return scores.squeeze(-1).float()  # (B,)


class VLMCritic:
    """A trained VLM critic: ``score(items)`` gives one float per (image path, text).

    Items are encoded as in training and right-padded, so an item scores the same alone or
    in a batch; a picture shared by several items (a turn's candidates) is processed once.
    """

    kind = KIND

    def __init__(self, model: VLMHeadModel, processor, max_len: int,
                 max_pixels: Optional[int] = None):
        self.model, self.processor, self.tokenizer = model, processor, processor.tokenizer
        self.encoder = VLMEncoder(processor, max_len, max_pixels)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id

    @torch.no_grad()
    def score(self, items: Sequence[VLMItem], batch_size: int = 8) -> List[float]:
        frames: Dict[str, Dict[str, object]] = {}
        encoded = []
        for image, text in items:
            if image not in frames:  # the picture's pixels, once per call
                frames[image] = self.encoder.frame(image)
            encoded.append(self.encoder.join(frames[image], text))
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
        device = next(self.model.parameters()).device
        scores: List[float] = [0.0] * len(encoded)
        was_training = self.model.training
        self.model.eval()
        step = max(1, int(batch_size))
        for start in range(0, len(order), step):
            chunk = order[start:start + step]
            batch = vlm_batch([encoded[i] for i in chunk], self.pad_id,
                              self.encoder.image_token_id)
            values = self.model(**{k: v.to(device) for k, v in batch.items()})  # (N,)
            for i, value in zip(chunk, values.tolist()):
                scores[i] = value
        self.model.train(was_training)
        return scores


def load_vlm_critic(path: str, device: Optional[Union[str, torch.device]] = None,
                    dtype: Union[str, torch.dtype] = "auto") -> VLMCritic:
    """Load a critic saved by ``train_dpo.py --critic_head vlm_regression``; ``device`` and
    ``dtype`` as :func:`~sweet_rl.training.heads.load_scalar_critic`."""
    from transformers import AutoProcessor

    model, info = load_head_model(path, VLMHeadModel, (KIND,), "a VLM critic", device, dtype)
    processor = AutoProcessor.from_pretrained(path)
    return VLMCritic(model, processor, int(info["max_len"]), info.get("max_pixels"))
