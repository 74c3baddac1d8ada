"""The ``vllm`` agent: offline ``vllm.LLM`` with tensor parallelism over the visible GPUs.

vLLM is imported only when this backend is built, so the rest of the package works without
it. The prompt building and sampling-parameter logic is kept in :func:`build_requests`, a pure
function that tests check on the CPU; the engine itself needs a GPU.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from sweet_rl.agents.base import Agent
from sweet_rl.types import AgentOutput, ChatMessages


def build_requests(tokenizer, conversations: List[ChatMessages], temperature: float,
                   max_tokens: int, seeds: Optional[List[int]] = None,
                   top_p: float = 1.0) -> List[Tuple[str, Dict[str, object]]]:
    """One (prompt text, SamplingParams keyword arguments) per conversation.

    The prompt is the tokenizer's chat template with the generation header, exactly what the
    ``hf`` backend records, so files from both backends train the same way. Each row gets its
    own seed so a dialogue's sampling does not depend on which rows share its batch.
    """
    from sweet_rl.hf_generation import format_chat, stop_token_ids

    stops = stop_token_ids(tokenizer)
    requests = []
    for index, messages in enumerate(conversations):
        params: Dict[str, object] = dict(temperature=temperature, top_p=top_p,
                                         max_tokens=max_tokens, stop_token_ids=stops,
                                         skip_special_tokens=True)
        if seeds is not None:
            params["seed"] = int(seeds[index])
        requests.append((format_chat(tokenizer, messages), params))
    return requests


def require_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the machine
        raise ImportError("the vllm agent backend needs vLLM and a GPU: "
                          "pip install 'sweet_rl[vllm]'") from err
    return vllm


class VLLMAgent(Agent):
    name = "vllm"

    def __init__(self, model_path: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                 tensor_parallel_size: Optional[int] = None, gpu_memory_utilization: float = 0.9,
                 max_model_len: Optional[int] = None, seed: int = 0):
        vllm = require_vllm()
        import torch

        from sweet_rl.hf_generation import load_tokenizer

        if tensor_parallel_size is None:
            tensor_parallel_size = max(1, torch.cuda.device_count())
        self.tokenizer = load_tokenizer(model_path)
        self.llm = vllm.LLM(model=model_path, tensor_parallel_size=tensor_parallel_size,
                            gpu_memory_utilization=gpu_memory_utilization,
                            max_model_len=max_model_len, seed=seed)
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def generate(self, conversations: List[ChatMessages], seeds: Optional[List[int]] = None,
                 keys=None) -> List[AgentOutput]:
        from vllm import SamplingParams

        requests = build_requests(self.tokenizer, conversations, self.temperature,
                                  self.max_new_tokens, seeds)
        prompts = [prompt for prompt, _ in requests]
        params = [SamplingParams(**kwargs) for _, kwargs in requests]
        results = self.llm.generate(prompts, params, use_tqdm=False)
        return [AgentOutput(prompt=p, output=r.outputs[0].text) for p, r in zip(prompts, results)]
