"""Build a tiny Llama-architecture model with a locally trained tokenizer — no download.

The tokenizer is a byte-level BPE trained in about a second on the bundled prompts and sample
tasks, with Llama-3-style special tokens and chat template, so every code path that handles
real Llama-3.1 checkpoints (chat formatting, ``<|eot_id|>`` stopping, the
``<|start_header_id|>assistant<|end_header_id|>`` response template) runs unchanged on it.
The weights are random: it writes gibberish and scores about 0 on ColBench.

    python -m sweet_rl.models.tiny_model outputs/tiny-llama
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

from sweet_rl.flags import Options, flag

BOS, EOS, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
HEADER_START, HEADER_END = "<|start_header_id|>", "<|end_header_id|>"
SPECIAL_TOKENS = [BOS, EOS, HEADER_START, HEADER_END, EOT, "<|pad|>"]

# Llama-3 layout: <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% else %}<|image|>{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def _training_text() -> Iterator[str]:
    """Text the BPE learns from: a frozen copy of early prompt texts (``tiny_corpus/``), the
    sample tasks (package data), plus code words.

    The corpus is frozen on purpose: the tokenizer (and so every token count a test states)
    must not change when a bundled prompt is edited, and a cached tiny model must never be
    stale against the code that built it.
    """
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package root
    for path in sorted(glob.glob(os.path.join(here, "tiny_corpus", "*.txt"))):
        with open(path, encoding="utf-8") as handle:
            yield handle.read()
    for path in sorted(glob.glob(os.path.join(here, "data", "*.jsonl"))):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    row = json.loads(line)
                    yield row.get("problem_description", "")
                    yield row.get("ground_truth", "")
    yield ("def return if else elif for while in range len list dict str int float None True "
           "False import print OUTPUT: I WANT TO ANSWER: ```python ``` I don't know.")


def build_tokenizer(vocab_size: int = 1024, extra_text: Iterable[str] = ()):
    """Train a byte-level BPE and wrap it as a transformers fast tokenizer. ``extra_text``
    (e.g. a task family's own words, :func:`sweet_rl.recipes.mini.tasks.corpus`) is learnt too,
    so that text is cut into fewer, whole-word tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(itertools.chain(_training_text(), extra_text),
                             trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOT,  # chat turns end with <|eot_id|>, as in Llama-3.1-Instruct
        pad_token="<|pad|>",
        additional_special_tokens=[EOS, HEADER_START, HEADER_END],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(output_dir: str, seed: int = 0, vocab_size: int = 1024,
                     hidden_size: int = 64, num_layers: int = 2,
                     max_position_embeddings: int = 8192,
                     extra_text: Iterable[str] = (), tie_embeddings: bool = False,
                     device: str = "cpu", dtype: Optional[str] = None, **layout) -> str:
    """Write a tiny random Llama model and its tokenizer to ``output_dir``; return the path.

    Its 4 attention heads are ``hidden_size / 4`` wide (16) unless ``head_dim`` (a ``layout``
    field) says otherwise: vLLM's CPU attention takes heads of 32, 64, 80, ... only, so its
    tests build ``head_dim=32`` (the same tokenizer, wider attention projections).

    ``layout``: other ``LlamaConfig`` fields (``intermediate_size``, ``num_attention_heads``,
    ``num_key_value_heads``, ``head_dim``) for a model that is not tiny, e.g. the GPU check's
    1B one, which is built on ``device`` (a GPU initialises 1B weights in a second) and saved
    in ``dtype`` (e.g. ``"bfloat16"``; default float32)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(vocab_size, extra_text)
    layout = {"intermediate_size": hidden_size * 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, **layout}
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tie_embeddings,
        **layout,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    if dtype:
        model.to(getattr(torch, dtype))
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(EOS)],
        pad_token_id=tokenizer.pad_token_id,
    )
    os.makedirs(output_dir, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def ensure_built(build, name: str, output_dir: Optional[str] = None, seed: int = 0) -> str:
    """Build a tiny model once with ``build(dir, seed=seed)`` into ``output_dir`` (default: the
    per-user cache, ``<cache>/sweet_rl/<name>-seed<seed>``) and reuse it afterwards.

    It is built in a scratch folder and renamed into place, so a concurrent run (two tests, a
    demo and a test) never loads a half-written model.
    """
    if output_dir is None:
        cache = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        output_dir = os.path.join(cache, "sweet_rl", f"{name}-seed{seed}")
    if os.path.exists(os.path.join(output_dir, "config.json")):
        return output_dir
    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{name}-", dir=parent)
    try:
        build(scratch, seed=seed)
        try:
            os.rename(scratch, output_dir)
        except OSError:  # somebody else finished first (or an empty folder was there)
            if not os.path.exists(os.path.join(output_dir, "config.json")):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return output_dir


def ensure_tiny_model(output_dir: Optional[str] = None, seed: int = 0) -> str:
    """The tiny Llama, built once (see :func:`ensure_built`)."""
    return ensure_built(build_tiny_model, "tiny-llama", output_dir, seed)


@dataclass(kw_only=True)
class TinyModelOptions(Options):
    """Build the tiny Llama (random weights, the local tokenizer) into OUTPUT_DIR."""

    POSITIONAL = ("output_dir", "seed")
    output_dir: str = flag("the model folder to write.", "outputs/tiny-llama")
    seed: int = flag("the seed of its random weights.", 0)


def write_tiny_model(opts: TinyModelOptions) -> str:
    path = build_tiny_model(opts.output_dir, seed=opts.seed)
    print(f"tiny model written to {path}")
    return path


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(write_tiny_model, TinyModelOptions, argv)


if __name__ == "__main__":
    main()
