"""The vLLM adapter: request building on the CPU; the engine itself only where a GPU is."""

import importlib.util

import pytest

from sweet_rl.agents.vllm_agent import build_requests
from sweet_rl.hf_generation import format_chat, load_tokenizer


def test_requests_carry_chat_prompts_seeds_and_stop_tokens(tiny_model_dir):
    tokenizer = load_tokenizer(tiny_model_dir)
    conversations = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]]
    requests = build_requests(
        tokenizer, conversations, temperature=1.0, max_tokens=1024, seeds=[7, 8]
    )
    assert [r[0] for r in requests] == [format_chat(tokenizer, c) for c in conversations]
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    for (_, params), seed in zip(requests, [7, 8]):
        assert (
            params["seed"] == seed and params["max_tokens"] == 1024 and params["temperature"] == 1.0
        )
        assert eot in params["stop_token_ids"]


def _gpu_and_vllm():
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _gpu_and_vllm(), reason="GPU test: needs vLLM and a CUDA device")
def test_vllm_agent_generates_on_gpu(tiny_model_dir):  # pragma: no cover - GPU only
    from sweet_rl.agents.vllm_agent import VLLMAgent

    agent = VLLMAgent(tiny_model_dir, max_new_tokens=8, gpu_memory_utilization=0.3)
    outs = agent.generate([[{"role": "user", "content": "hi"}]], seeds=[0])
    assert len(outs) == 1 and isinstance(outs[0].output, str)
