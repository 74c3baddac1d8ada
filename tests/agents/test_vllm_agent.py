"""The vLLM adapters' pure parts (requests, engine arguments), without vLLM; the engine itself
runs in the vLLM environment (tests/vllm/)."""

from sweet_rl.agents.vllm_agent import build_requests
from sweet_rl.models import vllm_engine
from sweet_rl.models.hf_generation import format_chat, load_tokenizer


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


def test_a_gpu_engine_gets_what_the_code_always_passed():
    kwargs = vllm_engine.engine_kwargs("M", cpu=False, seed=3, tensor_parallel_size=8)
    assert kwargs == dict(model="M", seed=3, tensor_parallel_size=8, max_model_len=None,
                          gpu_memory_utilization=0.9)
    assert vllm_engine.engine_kwargs("M", cpu=False, dtype="bfloat16")["dtype"] == "bfloat16"


def test_a_cpu_engine_runs_float32_eager_without_chunked_prefill():
    kwargs = vllm_engine.engine_kwargs("M", cpu=True, seed=3, model_length=8192)
    assert kwargs == dict(model="M", seed=3, tensor_parallel_size=1, max_model_len=None,
                          dtype="float32", enforce_eager=True, enable_chunked_prefill=False,
                          max_num_batched_tokens=8192, kv_cache_memory_bytes=4 * 2 ** 30)
    # a short model still gets vLLM's CPU batch budget; VLLM_CPU_KVCACHE_SPACE sets the cache
    short = vllm_engine.engine_kwargs("M", cpu=True, max_model_len=2048, kv_cache_gib=1.0,
                                      dtype="bfloat16")
    assert short["max_num_batched_tokens"] == 4096 and short["dtype"] == "bfloat16"
    assert "kv_cache_memory_bytes" not in short and "gpu_memory_utilization" not in short


def test_the_server_command_is_the_api_server_module():
    command = vllm_engine.server_command("DIR", "tiny", 8123, cpu=True, python="py")
    assert command[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert command[3:] == ["--model", "DIR", "--served-model-name", "tiny", "--host",
                           "127.0.0.1", "--port", "8123", "--dtype", "float32",
                           "--enforce-eager"]
