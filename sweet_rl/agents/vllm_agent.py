"""The ``vllm`` agent: offline ``vllm.LLM``, tensor parallel over the visible GPUs (or vLLM's
CPU build on the CPU).

vLLM is imported only when this backend is built (through
:mod:`sweet_rl.models.vllm_engine`, the one module that calls vLLM), so the rest of the package
works without it. The prompt building and sampling-parameter logic is kept in
:func:`build_requests`, a pure function; the engine itself runs in the vLLM tests (tests/vllm/).
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
    from sweet_rl.models.hf_generation import format_chat, stop_token_ids

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


class VLLMAgent(Agent):
    """``llm``: an engine already loaded on ``model_path`` (the tests share one); it is then
    the caller's to close."""

    name = "vllm"

    def __init__(self, model_path: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                 tensor_parallel_size: Optional[int] = None, gpu_memory_utilization: float = 0.9,
                 max_model_len: Optional[int] = None, seed: int = 0, dtype: str = "auto",
                 llm=None):
        from sweet_rl.models import vllm_engine
        from sweet_rl.models.hf_generation import load_tokenizer

        self.tokenizer = load_tokenizer(model_path)
        self.owns_llm = llm is None
        self.llm = llm if llm is not None else vllm_engine.load_llm(
            model_path, seed=seed, dtype=dtype, max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size)
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def generate(self, conversations: List[ChatMessages], seeds: Optional[List[int]] = None,
                 keys=None) -> List[AgentOutput]:
        from sweet_rl.models import vllm_engine

        requests = build_requests(self.tokenizer, conversations, self.temperature,
                                  self.max_new_tokens, seeds)
        prompts = [prompt for prompt, _ in requests]
        params = [vllm_engine.sampling_params(**kwargs) for _, kwargs in requests]
        results = vllm_engine.generate(self.llm, prompts, params)
        return [AgentOutput(prompt=p, output=vllm_engine.completion_text(self.tokenizer,
                                                                         r.outputs[0]))
                for p, r in zip(prompts, results)]

    def close(self) -> None:
        if self.owns_llm and self.llm is not None:
            from sweet_rl.models.vllm_engine import close_llm

            close_llm(self.llm)
        self.llm = None
