"""Scalar-head critics: one number per text from a pooled language-model backbone.

SWEET-RL (Zhou et al. 2025) trains its critic as a causal LM whose length-normalised log-prob
ratios are the turn advantages. The paper compares two critics that read a text and output a
single number instead: "SWEET-RL w/ Regression Head" (Table 3), trained with the
Bradley-Terry loss on the same trajectory pairs, and "SWEET w/ Value Function" (Figure 3a),
trained to predict whether the trajectory succeeds. Both are the same model here: the
agent's transformer backbone, the mean of its last hidden states over the real (non-padding)
tokens, and a linear layer hidden -> 1 (a regression score, or a success logit).

Only the backbone of the agent's causal LM is loaded (``AutoModel``): the ``lm_head``
(vocabulary x hidden, the largest matrix of a Llama) is never used by a scalar critic.

Saved layout (``Trainer.save_model``, which under ZeRO-3 gathers every shard, the head's too):

* ``model.safetensors``: the backbone under its causal-LM key names (``model.layers.0...``,
  the backbone's ``base_model_prefix``) plus ``score_head.weight`` (1, H) and
  ``score_head.bias`` (1,); no ``lm_head``;
* ``config.json``: the backbone's config (``architectures`` names the backbone class);
* ``critic_head.json``: ``{"kind": "regression" | "value", "pooling": "mean", "max_len": N}``.

:func:`load_scalar_critic` reads them back into a :class:`ScalarCritic` for ranking.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple, Type, Union

import torch
from torch import nn

HEAD_FILE = "critic_head.json"
HEAD_PREFIX = "score_head."
KINDS = ("regression", "value")


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden`` (B, T, H) over the positions where ``attention_mask`` (B, T) is 1.

    Returns (B, H) in float32 (a sum over thousands of bf16 values loses digits). A row without
    any real token gives zeros rather than a division by zero.
    """
    mask = attention_mask.to(torch.float32).unsqueeze(-1)  # (B, T, 1)
    total = (hidden.to(torch.float32) * mask).sum(dim=1)  # (B, H)
    count = mask.sum(dim=1).clamp(min=1.0)  # (B, 1)
    return total / count  # (B, H)


class ScalarHeadModel(nn.Module):
    """A transformer backbone, mean pooling and ``score_head`` (hidden -> 1).

    The backbone is registered under its ``base_model_prefix`` (``model`` for Llama), so the
    state dict has the causal LM's own key names and ``AutoModel.from_pretrained`` reads it
    back. ``forward`` returns one float32 score per row, (B,). The Trainer drives it as any
    ``nn.Module``; ``config`` is the backbone's (DeepSpeed's "auto" sizes read hidden_size).
    """

    def __init__(self, backbone: nn.Module, seed: int = 0):
        super().__init__()
        self.prefix = getattr(backbone, "base_model_prefix", "") or "model"
        self.add_module(self.prefix, backbone)
        self.config = backbone.config
        hidden = backbone.config.get_text_config().hidden_size
        self.score_head = nn.Linear(hidden, 1)
        # a new layer, drawn from its own generator so that --seed alone fixes it; small
        # weights (std 1/(H+1), as OpenRLHF's value head) keep the first scores near 0
        generator = torch.Generator().manual_seed(int(seed))
        weight = torch.randn(1, hidden, generator=generator) / (hidden + 1)  # (1, H)
        with torch.no_grad():
            self.score_head.weight.copy_(weight)
            self.score_head.bias.zero_()
        # one dtype per module: ZeRO flattens every parameter of a group into one buffer
        self.score_head.to(next(backbone.parameters()).dtype)

    @property
    def backbone(self) -> nn.Module:
        return getattr(self, self.prefix)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               use_cache=False).last_hidden_state  # (B, T, H)
        pooled = mean_pool(hidden, attention_mask)  # (B, H) float32
        weight = self.score_head.weight
        scores = self.score_head(pooled.to(weight.dtype))  # (B, 1)
        return scores.squeeze(-1).float()  # (B,)

    def activation_checkpointing_enable(self, **kwargs) -> None:
        """What the Trainer calls for --gradient_checkpointing: the backbone's own."""
        self.backbone.activation_checkpointing_enable(**kwargs)

    def gradient_checkpointing_enable(self, **kwargs) -> None:  # its name before transformers 5
        self.backbone.gradient_checkpointing_enable(**kwargs)


@contextlib.contextmanager
def _quiet_loading():
    """transformers logs a load report for the keys it skips; the caller checks them itself."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def load_backbone(path: str, dtype: Union[str, torch.dtype] = "auto",
                  attn_implementation: Optional[str] = None) -> nn.Module:
    """The transformer body of the causal LM (or scalar critic) at ``path``.

    The only checkpoint keys left over may be the LM's ``lm_head`` and the critic's
    ``score_head``; a backbone weight missing from the checkpoint is an error, not a random
    initialisation.
    """
    from transformers import AutoModel

    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    with _quiet_loading():
        backbone, info = AutoModel.from_pretrained(path, dtype=dtype, output_loading_info=True,
                                                   **extra)
    if info["missing_keys"]:
        raise ValueError(f"{path}: weights missing for {sorted(info['missing_keys'])[:5]}; "
                         "a scalar critic starts from a causal LM's backbone")
    skipped = [k for k in info["unexpected_keys"]
               if not k.startswith(("lm_head.", HEAD_PREFIX))]
    if skipped:
        raise ValueError(f"{path}: checkpoint weights the backbone does not use: {skipped[:5]}")
    backbone.config.use_cache = False
    return backbone


def save_head_files(model: ScalarHeadModel, output_dir: str, kind: str,
                    max_len: Optional[int] = None, extra: Optional[dict] = None) -> None:
    """``config.json`` and ``critic_head.json`` next to the weights the Trainer wrote;
    ``extra``: more entries for ``critic_head.json`` (the VLM critic's image size bound)."""
    config = copy.deepcopy(model.config)
    config.architectures = [type(model.backbone).__name__]  # no lm_head was saved
    config.save_pretrained(output_dir)
    info = {"kind": kind, "pooling": "mean", "max_len": max_len, **(extra or {})}
    with open(os.path.join(output_dir, HEAD_FILE), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(info, indent=2) + "\n")


def _head_tensors(path: str, names=("weight", "bias")) -> Dict[str, torch.Tensor]:
    """The head's tensors ``names`` from the (possibly sharded) safetensors files (the VLM
    critic's head has no bias, as the training fork's)."""
    from safetensors import safe_open

    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as handle:
            files = sorted(set(json.load(handle)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    found: Dict[str, torch.Tensor] = {}
    for name in files:
        with safe_open(os.path.join(path, name), framework="pt") as handle:
            for key in handle.keys():
                if key.startswith(HEAD_PREFIX):
                    found[key[len(HEAD_PREFIX):]] = handle.get_tensor(key)
    if set(found) != set(names):
        wanted = " / ".join(HEAD_PREFIX + name for name in names)
        raise ValueError(f"{path}: no {wanted} in its weights")
    return found


class ScalarCritic:
    """A trained scalar-head critic ready to score texts (see :func:`load_scalar_critic`).

    ``kind`` is ``"regression"`` (a Bradley-Terry score) or ``"value"`` (the logit of success;
    higher means more likely to succeed). Texts are tokenised as in training (no added special
    tokens; chat-formatted text carries its own BOS), cut from the left to ``max_len`` keeping
    the BOS, and right-padded with an attention mask, so a text scores the same alone or in a
    batch.
    """

    def __init__(self, model: ScalarHeadModel, tokenizer, kind: str,
                 max_len: Optional[int] = None):
        self.model, self.tokenizer, self.kind, self.max_len = model, tokenizer, kind, max_len
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    def _ids(self, text: str) -> List[int]:
        from sweet_rl.training.collators import truncate_left

        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if self.max_len:
            ids, _, _ = truncate_left(ids, [0] * len(ids), self.max_len,
                                      self.tokenizer.bos_token_id)
        return ids

    @torch.no_grad()
    def score(self, texts: List[str], batch_size: int = 8) -> List[float]:
        """One float per text, in the order given."""
        from sweet_rl.training.collators import Tokenized, pad_batch

        ids = [self._ids(text) for text in texts]
        # similar lengths together: less padding, and padding never changes a score
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        device = next(self.model.parameters()).device
        scores: List[float] = [0.0] * len(ids)
        was_training = self.model.training
        self.model.eval()
        for start in range(0, len(order), max(1, int(batch_size))):
            chunk = order[start:start + max(1, int(batch_size))]
            batch = pad_batch([Tokenized(ids[i], [0] * len(ids[i])) for i in chunk],
                              self.tokenizer.pad_token_id)
            values = self.model(input_ids=batch["input_ids"].to(device),
                                attention_mask=batch["attention_mask"].to(device))  # (N,)
            for i, value in zip(chunk, values.tolist()):
                scores[i] = value
        self.model.train(was_training)
        return scores


def load_head_model(path: str, model_class: Type[ScalarHeadModel], kinds: Sequence[str],
                    what: str, device: Optional[Union[str, torch.device]] = None,
                    dtype: Union[str, torch.dtype] = "auto") -> Tuple[ScalarHeadModel, dict]:
    """``(model, info)``: the critic saved at ``path`` as ``model_class`` (a
    :class:`ScalarHeadModel`), in eval mode on ``device``, and its ``critic_head.json``.

    One loader for the text and the VLM critics, so that both read the head file and choose
    device and dtype by the same rule (see :func:`load_scalar_critic`). ``kinds``: the head
    kinds the caller can score; ``what`` names such a critic in the error for a path without
    a head file (a log-prob critic, a plain LM).
    """
    head_file = os.path.join(path, HEAD_FILE)
    if not os.path.exists(head_file):
        raise FileNotFoundError(f"{head_file} not found: {path} is not {what} (train one with "
                                f"train_dpo.py --critic_head {'|'.join(kinds)})")
    with open(head_file, encoding="utf-8") as handle:
        info = json.load(handle)
    if info.get("kind") not in kinds or info.get("pooling", "mean") != "mean":
        raise ValueError(f"{head_file}: not a {' or '.join(kinds)} head: {info}")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dtype is None or dtype == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        dtype = torch.bfloat16 if bf16 else torch.float32
    elif isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    model = model_class(load_backbone(path, dtype))
    # float32 whatever the backbone's dtype: a bf16 head would round every score
    head = model.score_head.float()
    names = ("weight",) if head.bias is None else ("weight", "bias")  # the VLM head: no bias
    tensors = _head_tensors(path, names)
    with torch.no_grad():
        for name in names:
            getattr(head, name).copy_(tensors[name].float())  # weight (1, H), bias (1,)
    return model.to(device).eval(), info


def load_scalar_critic(path: str, device: Optional[Union[str, torch.device]] = None,
                       dtype: Union[str, torch.dtype] = "auto") -> ScalarCritic:
    """Load a critic saved by ``train_dpo.py --critic_head regression|value``.

    ``device``: default CUDA when available, else the CPU. ``dtype``: a ``torch.dtype`` or its
    name (``"bfloat16"``); ``"auto"`` (or None) is the project's rule for loaded models:
    bfloat16 on a GPU that has it, float32 elsewhere. The head itself runs in float32.
    """
    from transformers import AutoTokenizer

    model, info = load_head_model(path, ScalarHeadModel, KINDS, "a scalar-head critic",
                                  device, dtype)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return ScalarCritic(model, tokenizer, info["kind"], info.get("max_len"))
