"""One decoding step of a plain Llama model, without transformers' module machinery.

On the CPU with the miniature's tiny models, a step of ``model(...)`` for one new token per
row spends about half its time outside arithmetic: argument decorators, the causal-mask
builder, the cache object, output dataclasses. :class:`LlamaStep` runs the same tensor
operations, in the same order, on the same layouts: the same logits bit for bit, in about
two thirds of the time. Two callers: the shared-prompt sampler (keys and values in buffers
written in place, :class:`Buffers`) and ``generate()`` on a batch of prompts, whose decoding
calls :func:`decoding` routes through the step (keys and values in generate()'s own cache,
padding as its attention mask says).

"The same operations" is a claim about the installed transformers, whose Llama code can change
between releases, so it is checked, not assumed: the first step of a model in each mode
(without a mask, with a padding mask) is compared with ``model(...)`` (``torch.equal`` on the
logits) and the verdict is kept on the model (:func:`record`). A model that differs, or that
is not a plain Llama on the CPU or a CUDA device (rotary scaling, biases, another attention
implementation, hooks, quantized layers), keeps ``model(...)``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect

# the verdicts of the first comparisons with model(...), by mode, kept on the model object
_VERDICT = "_sweet_rl_fast_decode_equal"


def cache_keyword(model) -> str:
    """The forward's cache keyword: ``cache`` in newer transformers, ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"


def supports(model) -> bool:
    """Whether the model is the plain Llama this step reproduces."""
    import torch
    from torch import nn

    config = model.config
    if getattr(config, "model_type", None) != "llama":
        return False
    # rotary settings: ``rope_parameters`` in transformers 5, ``rope_scaling`` before
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    head_dim = getattr(config, "head_dim", None) or (
        config.hidden_size // config.num_attention_heads)
    plain = (rope.get("rope_type", "default") == "default"
             and getattr(config, "_attn_implementation", None) == "sdpa"
             and config.hidden_act == "silu" and head_dim <= 256
             and not config.attention_bias and not config.mlp_bias
             and getattr(config, "pretraining_tp", 1) == 1
             and not (model.training and config.attention_dropout))  # no dropout here
    if not plain or model.device.type not in ("cpu", "cuda"):
        return False
    for module in model.modules():  # hooks (offloading) and other layer types run model(...)
        if module._forward_hooks or module._forward_pre_hooks:
            return False
        if isinstance(module, nn.Linear) and type(module) is not nn.Linear:
            return False
    return getattr(model.model.rotary_emb, "attention_scaling", 1.0) == 1.0 and isinstance(
        model.model.rotary_emb.inv_freq, torch.Tensor)


class Buffers:
    """Keys and values of every layer in buffers with room for ``new_tokens`` more positions,
    written in place where the cache concatenates at every step (copying all it holds);
    attention reads the filled part: the same numbers in the same layout along the sequence.
    Built from a prefill's DynamicCache (rows already repeated)."""

    def __init__(self, cache, new_tokens: int):
        self.length = cache.layers[0].keys.shape[-2]  # the prompt's T
        self.keys = [self._room(layer.keys, new_tokens) for layer in cache.layers]
        self.values = [self._room(layer.values, new_tokens) for layer in cache.layers]
        self.filled = self.length

    def _room(self, filled, new_tokens: int):
        """``filled`` [rows, kv, T, d] copied into a buffer [rows, kv, T + new_tokens, d]."""
        *lead, _, width = filled.shape
        buffer = filled.new_empty((*lead, self.length + new_tokens, width))
        buffer[..., :self.length, :] = filled
        return buffer

    def append(self, index: int, key, value):
        """Adds one position ``[rows, kv, 1, d]`` to layer ``index``; all its keys and values."""
        end = self.length + 1
        self.keys[index][..., self.length:end, :] = key
        self.values[index][..., self.length:end, :] = value
        if index == len(self.keys) - 1:
            self.length = end
        return self.keys[index][..., :end, :], self.values[index][..., :end, :]


class CacheLayers:
    """generate()'s own DynamicCache, grown as ``model(...)`` grows it (``update``), or read
    without growing (``grow=False``: the comparison step beside model(...)'s own)."""

    def __init__(self, cache, grow: bool = True):
        self.cache, self.grow = cache, grow
        self.before = [(layer.keys, layer.values) for layer in cache.layers]

    def append(self, index: int, key, value):
        import torch

        if self.grow:
            return self.cache.update(key, value, index)
        keys, values = self.before[index]
        return torch.cat([keys, key], dim=-2), torch.cat([values, value], dim=-2)


class LlamaStep:
    """``step(tokens [rows, 1], positions [rows, 1], mask)`` gives the next logits
    ``[rows, V]``, as ``model(..., logits_to_keep=1).logits[:, -1, :]``; ``mask`` is None
    (no padding) or generate()'s 2-D attention mask ``[rows, T + 1]``, 1 on real tokens."""

    def __init__(self, model, store):
        self.model = model.model
        self.lm_head = model.get_output_embeddings()
        self.store = store
        config = model.config
        self.head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads)
        self.groups = config.num_attention_heads // config.num_key_value_heads

    def step(self, tokens, positions, mask=None):
        import torch

        model = self.model
        hidden = model.embed_tokens(tokens)  # [rows, 1, H]
        # rotary angles, as LlamaRotaryEmbedding computes them (default rope, scaling 1)
        inv_freq = model.rotary_emb.inv_freq.to(device=hidden.device, dtype=torch.float)
        freqs = positions[..., None].float() * inv_freq  # [rows, 1, d/2]
        angles = torch.cat((freqs, freqs), dim=-1)  # [rows, 1, d]
        cos = (angles.cos() * 1.0).to(dtype=hidden.dtype).unsqueeze(1)  # [rows, 1, 1, d]
        sin = (angles.sin() * 1.0).to(dtype=hidden.dtype).unsqueeze(1)
        allowed = None if mask is None else mask.bool()[:, None, None, :]  # [rows, 1, 1, T+1]
        for index, layer in enumerate(model.layers):
            normed = layer.input_layernorm.forward(hidden)  # [rows, 1, H]
            attended = self._attention(index, layer.self_attn, normed, cos, sin, allowed)
            hidden = hidden + attended
            hidden = hidden + layer.mlp.forward(layer.post_attention_layernorm.forward(hidden))
        hidden = model.norm.forward(hidden)
        return self.lm_head(hidden[:, -1:, :])[:, -1, :]  # [rows, V]

    def _attention(self, index, attention, normed, cos, sin, allowed):
        """The attention block's output ``[rows, 1, H]``, as LlamaAttention with sdpa."""
        import torch
        from torch.nn import functional

        rows, half, width = normed.shape[0], self.head_dim // 2, self.head_dim
        shape = (rows, 1, -1, width)
        query = functional.linear(normed, attention.q_proj.weight).view(shape).transpose(1, 2)
        key = functional.linear(normed, attention.k_proj.weight).view(shape).transpose(1, 2)
        value = functional.linear(normed, attention.v_proj.weight).view(shape).transpose(1, 2)
        query = (query * cos) + (torch.cat((-query[..., half:], query[..., :half]), -1) * sin)
        key = (key * cos) + (torch.cat((-key[..., half:], key[..., :half]), -1) * sin)
        keys, values = self.store.append(index, key, value)  # [rows, kv, T+1, d] each
        extra = {}
        if self.groups > 1 and allowed is None:  # grouped heads inside sdpa
            extra["enable_gqa"] = True
        elif self.groups > 1:  # a mask: the heads of a group as the query's rows
            query = query.reshape(rows, -1, self.groups, width)  # [rows, kv, groups, d]
        attended = functional.scaled_dot_product_attention(
            query, keys, values, attn_mask=allowed, dropout_p=0.0, scale=attention.scaling,
            is_causal=False, **extra)  # [rows, heads, 1, d] (or [rows, kv, groups, d])
        attended = attended.reshape(rows, -1, 1, width).transpose(1, 2).contiguous()
        attended = attended.reshape(rows, 1, -1).contiguous()  # [rows, 1, heads * d]
        return functional.linear(attended, attention.o_proj.weight)


def verdict(model, mode: str):
    """True or False once a step of ``mode`` ("plain", "padded") was compared; None before."""
    return getattr(model, _VERDICT, {}).get(mode)


def record(model, mode: str, equal: bool) -> None:
    """Keeps a comparison's verdict: a mode whose step differed never takes it again."""
    verdicts = dict(getattr(model, _VERDICT, {}))
    verdicts[mode] = bool(equal)
    setattr(model, _VERDICT, verdicts)


def agrees(model, mode: str, step, expected) -> bool:
    """Compares ``step()``'s logits with ``model(...)``'s ``expected`` [rows, V] and records
    the verdict for ``mode``; a step that cannot run (shapes it does not know) differs."""
    import torch

    try:
        equal = torch.equal(step(), expected)
    except (RuntimeError, ValueError, AttributeError):
        equal = False
    record(model, mode, equal)
    return equal


def fast_step(model, cache, new_tokens: int):
    """A :class:`LlamaStep` on :class:`Buffers` for this prefill, or None where
    ``model(...)`` must decode."""
    if not supports(model) or verdict(model, "plain") is False:
        return None
    try:
        return LlamaStep(model, Buffers(cache, new_tokens))
    except AttributeError:  # a cache without per-layer key/value tensors
        return None


@contextlib.contextmanager
def decoding(model):
    """Within, ``model(...)``'s decoding calls (one token per row, after a prefill in a
    cache, as generate() makes them) run :class:`LlamaStep` on that cache; every other
    call, and every call of a mode whose first step differed, is model(...)'s own. Not for
    two threads generating with one model at once."""
    if not supports(model):
        yield
        return
    plain = model.forward
    name = cache_keyword(model)

    @functools.wraps(plain)  # generate() reads the signature: it passes what forward takes
    def forward(*args, **kwargs):
        cache, tokens = kwargs.get(name), kwargs.get("input_ids")
        mask, positions = kwargs.get("attention_mask"), kwargs.get("position_ids")
        mode = "plain" if mask is None else "padded"
        others = set(kwargs) - {"input_ids", "attention_mask", "position_ids", name,
                                "use_cache", "logits_to_keep", "return_dict"}
        # a cache that grows by concatenation only (a static cache writes at given places)
        if (args or others or tokens is None or tokens.shape[1] != 1 or positions is None
                or type(cache) is not DynamicCache or not cache.get_seq_length()
                or verdict(model, mode) is False or (mask is not None and mask.dim() != 2)):
            return plain(*args, **kwargs)
        if verdict(model, mode) is None:  # this mode's first step: the two must agree
            side = LlamaStep(model, CacheLayers(cache, grow=False))
            out = plain(*args, **kwargs)
            agrees(model, mode, lambda: side.step(tokens, positions, mask), out.logits[:, -1, :])
            return out
        logits = LlamaStep(model, CacheLayers(cache)).step(tokens, positions, mask)
        return CausalLMOutputWithPast(logits=logits[:, None, :], **{name: cache})  # [rows, 1, V]

    from transformers import DynamicCache
    from transformers.modeling_outputs import CausalLMOutputWithPast

    own = model.__dict__.get("forward")  # a forward set on the instance before, if any
    model.forward = forward
    try:
        yield
    finally:
        if own is None:
            del model.forward
        else:
            model.forward = own
