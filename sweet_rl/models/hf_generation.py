"""Batched text generation with transformers, shared by the ``hf`` agent and the local simulator.

Prompts are chat-formatted with the tokenizer's own template, left-padded and generated in
mini-batches; generation stops at the tokenizer's end-of-turn tokens (``<|eot_id|>`` for
Llama-3). Sampling is reproducible per row: each row draws its tokens from its own generator,
seeded with the row's seed, so its sample does not depend on the rows that share its batch
(:class:`RowSampler`). Greedy decoding (temperature 0) is transformers' own. A batch of one
prompt repeated (Best-of-N's candidates) reads the prompt once and decodes the copies together
(:mod:`sweet_rl.models.shared_prompt`), with the same tokens as ``generate()``. A plain Llama
decodes through :mod:`sweet_rl.models.llama_decode` on both paths: the same logits bit for bit,
faster.

:meth:`HFGenerator.generate_with_stops` also tells, per row, which end-of-turn token the
generation stopped on (``None`` when it ran out of ``max_new_tokens``): the decoded text never
holds it, but the sample stage scores it as vLLM's per-token log-probs do.
"""

from __future__ import annotations

import logging
from typing import Dict, List, NamedTuple, Optional, Sequence

from sweet_rl.models import llama_decode, shared_prompt

logger = logging.getLogger(__name__)


def pick_device(device: Optional[str] = None) -> str:
    import torch

    if device not in (None, "", "auto"):
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def eos_token_of(path: str) -> str:
    """The tokenizer's end-of-sequence token, ``AutoTokenizer.from_pretrained(path).eos_token``
    (or ``""`` when it has none), read from a local folder's ``tokenizer_config.json`` where
    that file names it: loading the tokenizer imports torch with transformers, about 7
    CPU-seconds for a stage that needs one string. Anything else (a hub id, no such entry, an
    explicit null) loads the tokenizer."""
    import json
    import os

    config = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as handle:
            eos = json.load(handle).get("eos_token")
        if isinstance(eos, dict):  # a serialized AddedToken
            eos = eos.get("content")
        if isinstance(eos, str) and eos:
            return eos
    return load_tokenizer(path).eos_token or ""


def format_chat(tokenizer, messages: Sequence[Dict[str, object]]) -> str:
    """The exact prompt text the model sees (recorded as the turn's ``input``)."""
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


def stop_token_ids(tokenizer) -> List[int]:
    """End-of-turn ids: the tokenizer's eos plus Llama-3's ``<|eot_id|>``/``<|end_of_text|>``/
    ``<|eom_id|>`` (the three ids of Llama-3.1-Instruct's generation config, which vLLM stops
    on)."""
    ids = {tokenizer.eos_token_id}
    for token in ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|im_end|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id and token_id >= 0:
            ids.add(token_id)
    return sorted(i for i in ids if i is not None)


class Generation(NamedTuple):
    """One completion: its text (special tokens removed), the end-of-turn id it stopped on and
    how many tokens it generated (that stop included; throughput figures count them)."""

    text: str
    stop_id: Optional[int]
    tokens: int = 0


def first_stop(row: Sequence[int], stop_ids: Sequence[int]) -> Optional[int]:
    """The first end-of-turn id among a row's new tokens, or None (cut at max_new_tokens).

    generate() pads a finished row after its stop token (with the pad id, often the eos), so
    the first stop id is the one the row ended on; an unfinished row has none.
    """
    stops = set(stop_ids)
    for token in row:
        if int(token) in stops:
            return int(token)
    return None


def generated_length(row: Sequence[int], stop_ids: Sequence[int]) -> int:
    """A row's new tokens up to and including its first end-of-turn id (what follows it is
    padding), or all of them when it was cut at max_new_tokens."""
    stops = set(stop_ids)
    for position, token in enumerate(row):
        if int(token) in stops:
            return position + 1
    return len(row)


class RowSampler:
    """A logits processor that samples every row's next token from the row's own generator.

    transformers' sampler draws a whole batch from one global random stream, so a row's tokens
    would depend on its batch mates. Here rows advance in lockstep, one token per step, and
    row i's t-th token takes the t-th uniform draw of generator i, turned into a token by
    inverse CDF over the row's tempered (and top-p filtered) distribution. The chosen token is
    returned as the only finite score, so greedy ``generate()`` keeps exactly it.
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float = 1.0):
        import torch
        from transformers.generation.logits_process import TopPLogitsWarper

        # CPU generators: a seed gives the same draws whatever device the model is on.
        self.generators = [torch.Generator().manual_seed(int(seed)) for seed in seeds]
        self.temperature = float(temperature)
        self.top_p = TopPLogitsWarper(top_p) if top_p < 1.0 else None

    def __call__(self, input_ids, scores):  # input_ids [B, T], scores [B, V]
        import torch

        if scores.shape[0] != len(self.generators):
            raise ValueError(f"{scores.shape[0]} rows but {len(self.generators)} generators")
        scores = scores / self.temperature
        if self.top_p is not None:
            scores = self.top_p(input_ids, scores)  # dropped tokens at -inf
        probs = torch.softmax(scores.double(), dim=-1)  # [B, V]; double: a long cumsum stays exact
        cdf = probs.cumsum(dim=-1)  # [B, V]
        draws = torch.stack([torch.rand((), dtype=torch.float64, generator=g)
                             for g in self.generators]).to(cdf.device)  # [B]
        targets = (draws * cdf[:, -1]).unsqueeze(-1)  # [B, 1]
        tokens = torch.searchsorted(cdf, targets, right=True)  # [B, 1]; right: skips 0-mass ids
        # rounding can put a target at the very top: fall back to the last id with mass
        vocab = probs.shape[-1]
        last = vocab - 1 - (probs > 0).flip(-1).int().argmax(dim=-1, keepdim=True)  # [B, 1]
        tokens = torch.minimum(tokens, last)  # [B, 1]
        return torch.full_like(scores, float("-inf")).scatter_(-1, tokens, 0.0)  # [B, V]


class HFGenerator:
    """A transformers causal LM that turns chat conversations into replies."""

    def __init__(self, model_path: str, device: Optional[str] = None, dtype: str = "auto",
                 max_new_tokens: int = 1024, temperature: float = 1.0, top_p: float = 1.0,
                 batch_size: int = 16, model=None, tokenizer=None):
        from transformers import AutoModelForCausalLM

        self.device = pick_device(device)
        self.tokenizer = tokenizer or load_tokenizer(model_path)
        self.tokenizer.padding_side = "left"  # generation continues from the right edge
        if model is None:
            torch_dtype = self._dtype(dtype)
            model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype)
            model.to(self.device)
            model.eval()
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.batch_size = max(1, batch_size)
        self.stop_ids = stop_token_ids(self.tokenizer)

    def _dtype(self, dtype: str):
        import torch

        if dtype == "auto":
            # bf16 on GPUs that have it; float32 on the CPU, where bf16 matmuls are slow.
            if self.device.startswith("cuda") and torch.cuda.is_bf16_supported():
                return torch.bfloat16
            return torch.float32
        return getattr(torch, dtype)

    def format(self, messages: Sequence[Dict[str, object]]) -> str:
        return format_chat(self.tokenizer, messages)

    def generate(self, prompts: List[str], seeds: Optional[List[int]] = None,
                 temperature: Optional[float] = None,
                 max_new_tokens: Optional[int] = None) -> List[str]:
        """Raw completions for already formatted prompts, in order."""
        return [
            g.text for g in self.generate_with_stops(prompts, seeds, temperature, max_new_tokens)
        ]

    def generate_with_stops(self, prompts: List[str], seeds: Optional[List[int]] = None,
                            temperature: Optional[float] = None,
                            max_new_tokens: Optional[int] = None) -> List[Generation]:
        """Like :meth:`generate`, with the end-of-turn id each completion stopped on."""
        import torch
        from transformers import LogitsProcessorList

        temperature = self.temperature if temperature is None else temperature
        max_new_tokens = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        sampling = temperature > 0
        if seeds is None:
            # unseeded rows still follow torch's global seed (torch.manual_seed before a call)
            seeds = torch.randint(0, 2 ** 31, (len(prompts),)).tolist() if sampling else []
        elif len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        outputs: List[Generation] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start:start + self.batch_size]
            if shared_prompt.applies(self.model, chunk):  # N samples of one prompt
                processor = RowSampler(seeds[start:start + self.batch_size], temperature,
                                       self.top_p) if sampling else None
                new_tokens = shared_prompt.generate_shared(
                    self.model, shared_prompt.prompt_ids(self.tokenizer, chunk[0], self.device),
                    len(chunk), max_new_tokens, self.stop_ids, self.tokenizer.pad_token_id,
                    processor)  # [B, new]
                outputs.extend(self._generations(new_tokens))
                continue
            batch = self.tokenizer(chunk, return_tensors="pt", padding=True,
                                   add_special_tokens=False).to(self.device)
            # Sampling goes through RowSampler under greedy generate(); warpers stay off.
            kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False,
                          eos_token_id=self.stop_ids, pad_token_id=self.tokenizer.pad_token_id)
            if sampling:
                row_seeds = seeds[start:start + self.batch_size]
                kwargs["logits_processor"] = LogitsProcessorList(
                    [RowSampler(row_seeds, temperature, self.top_p)])
            with torch.no_grad(), llama_decode.decoding(self.model):
                generated = self.model.generate(**batch, **kwargs)  # [B, prompt+new]
            new_tokens = generated[:, batch["input_ids"].shape[1]:]  # [B, new]
            outputs.extend(self._generations(new_tokens))
        return outputs

    def _generations(self, new_tokens) -> List[Generation]:
        """Each row of new tokens ``[B, new]`` (pads after its stop) as a :class:`Generation`."""
        texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [Generation(text, first_stop(row, self.stop_ids),
                           generated_length(row, self.stop_ids))
                for text, row in zip(texts, new_tokens.tolist())]
