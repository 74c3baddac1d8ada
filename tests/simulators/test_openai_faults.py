"""Fault injection for the OpenAI-compatible client, simulator and agent (scripted fake server)."""

import logging
import time

import pytest

from sweet_rl.agents.openai_agent import OpenAIAgent, is_reasoning_model, render_messages
from sweet_rl.models.openai_compat import ChatClient, ChatResult, EndpointUnavailable, base_url_from
from sweet_rl.simulators.base import SimulatorReply
from sweet_rl.simulators.openai_simulator import OpenAISimulator
from tests.serve_helpers import free_port
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step

HELLO = [{"role": "user", "content": "hello"}]
FAST = dict(backoff=0.05, max_backoff=1.0, timeout=5)


def test_base_url_from():
    assert base_url_from("localhost", 8000) == "http://localhost:8000/v1"
    assert base_url_from("https://api.openai.com/v1", 8000) == "https://api.openai.com/v1"
    assert base_url_from("http://10.0.0.5:9000/v1/") == "http://10.0.0.5:9000/v1"


def test_retries_503_and_429_with_backoff_then_succeeds(caplog):
    script = [Step(503), Step(429), Step(200)]
    with FakeOpenAIServer(script) as server, caplog.at_level(logging.WARNING):
        client = ChatClient(server.base_url, "fake", **FAST)
        result = client.complete(HELLO, temperature=0.0, max_tokens=8)
    assert result == ChatResult(text="echo: hello", error=None, finish_reason="stop")
    assert server.attempts == 3
    gaps = [b - a for a, b in zip(server.times, server.times[1:])]
    # Exponential: at least backoff * 2**k before retry k (jitter only adds).
    assert gaps[0] >= 0.05 and gaps[1] >= 0.10
    assert sum("retry 1/5" in r.getMessage() for r in caplog.records) == 1
    assert "HTTP 503" in caplog.text and "HTTP 429" in caplog.text


def test_retry_after_header_is_honoured():
    script = [Step(429, headers={"Retry-After": "0.3"}), Step(200)]
    with FakeOpenAIServer(script) as server:
        ChatClient(server.base_url, "fake", **FAST).complete(HELLO, 0.0, 8)
    assert server.times[1] - server.times[0] >= 0.3


def test_context_too_long_is_rejected_without_retry():
    body = {"error": {"message": "maximum context length exceeded", "type": "BadRequestError"}}
    with FakeOpenAIServer([Step(400, body=body)]) as server:
        simulator = OpenAISimulator("fake", base_url=server.base_url, **FAST)
        replies = simulator.reply_batch([HELLO])
        simulator.close()
    assert server.attempts == 1
    assert len(replies) == 1 and replies[0].text is None
    assert "400" in replies[0].error and "maximum context length exceeded" in replies[0].error


def test_fastapi_style_422_detail_is_reported():
    with FakeOpenAIServer([Step(422, body={"detail": "Unexpected fields: {'foo'}"})]) as server:
        result = ChatClient(server.base_url, "fake", **FAST).complete(HELLO, 0.0, 8)
    assert result.text is None and "422" in result.error and "Unexpected fields" in result.error
    assert server.attempts == 1


def test_persistent_5xx_ends_that_request_only():
    with FakeOpenAIServer([Step(500)]) as server:
        client = ChatClient(server.base_url, "fake", max_retries=2, backoff=0.01)
        result = client.complete(HELLO, 0.0, 8)
    assert server.attempts == 3
    assert result.text is None and "500" in result.error and "scripted 500" in result.error


def test_hanging_server_is_retried_then_unavailable():
    with FakeOpenAIServer([Step(200, delay=3.0)]) as server:
        client = ChatClient(server.base_url, "fake", timeout=0.3, max_retries=2, backoff=0.01)
        start = time.monotonic()
        with pytest.raises(EndpointUnavailable, match="timed out") as info:
            client.complete(HELLO, 0.0, 8)
        elapsed = time.monotonic() - start
    assert server.attempts == 3
    assert server.base_url in str(info.value)
    assert elapsed < 2.5


def test_rejected_api_key_stops_the_run():
    with FakeOpenAIServer([Step(401, body={"error": {"message": "bad key"}})]) as server:
        with pytest.raises(EndpointUnavailable, match="bad key"):
            ChatClient(server.base_url, "fake", **FAST).complete(HELLO, 0.0, 8)
    assert server.attempts == 1


def test_unreachable_server_fails_fast_at_construction():
    url = f"http://127.0.0.1:{free_port()}/v1"
    start = time.monotonic()
    with pytest.raises(EndpointUnavailable) as info:
        OpenAISimulator("fake", base_url=url)
    assert time.monotonic() - start < 5
    assert url in str(info.value) and "vllm serve" in str(info.value)
    assert "transformers serve" in str(info.value)


def test_unreachable_server_during_a_batch_raises():
    url = base_url_from("127.0.0.1", free_port())
    client = ChatClient(url, "fake", max_retries=2, backoff=0.01)
    with pytest.raises(EndpointUnavailable, match=url.replace(".", r"\.")):
        client.complete_batch([HELLO] * 4, 0.0, 8)
    client.close()


def test_models_endpoint_error_still_counts_as_reachable():
    # `transformers serve` answers GET /v1/models with 500 when the HF cache folder is missing.
    with FakeOpenAIServer([Step(200)], models_status=500) as server:
        OpenAISimulator("fake", base_url=server.base_url).close()


def test_batch_keeps_order_and_passes_seeds():
    conversations = [[{"role": "user", "content": f"q{i}"}] for i in range(12)]
    with FakeOpenAIServer([Step(200, delay=0.05)]) as server:
        client = ChatClient(server.base_url, "fake", max_workers=4)
        results = client.complete_batch(conversations, 0.7, 8, seeds=list(range(100, 112)))
        client.close()
    assert [r.text for r in results] == [f"echo: q{i}" for i in range(12)]
    by_question = {body["messages"][-1]["content"]: body for body in server.requests}
    assert by_question["q3"]["seed"] == 103 and by_question["q3"]["temperature"] == 0.7
    assert by_question["q3"]["max_tokens"] == 8


def test_simulator_is_greedy_and_returns_replies():
    with FakeOpenAIServer([Step(200)]) as server:
        simulator = OpenAISimulator("fake", base_url=server.base_url, max_tokens=32)
        replies = simulator.reply_batch([HELLO, [{"role": "user", "content": "bye"}]])
    assert replies == [SimulatorReply("echo: hello"), SimulatorReply("echo: bye")]
    assert all(body["temperature"] == 0.0 and body["max_tokens"] == 32
               for body in server.requests)


def test_agent_without_tokenizer_renders_messages_and_records_rejections(caplog):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    script = [Step(400, body={"error": {"message": "too long"}})]
    with FakeOpenAIServer(script, models=("my-model",)) as server, \
            caplog.at_level(logging.WARNING):
        agent = OpenAIAgent("my-model", server.base_url, api_key="k", max_tokens=16)
        [out] = agent.generate([messages], seeds=[1])
    assert out.output == ""
    assert out.prompt == "<|system|>\nbe brief\n<|user|>\nhi\n<|assistant|>\n"
    assert out.prompt == render_messages(messages)
    assert "too long" in caplog.text


def test_agent_reasoning_models_use_max_completion_tokens():
    assert is_reasoning_model("o1-mini") and is_reasoning_model("openai/o3")
    assert not is_reasoning_model("gpt-4o") and not is_reasoning_model("Llama-3.1-8B")
    with FakeOpenAIServer([Step(200)], models=("o1-mini", "gpt-4o")) as server:
        OpenAIAgent("o1-mini", server.base_url, api_key="k", max_tokens=64).generate([HELLO])
        OpenAIAgent("gpt-4o", server.base_url, api_key="k", temperature=0.5,
                    max_tokens=64).generate([HELLO])
    o1, gpt = server.requests
    assert o1["max_completion_tokens"] == 64 and "max_tokens" not in o1
    assert "temperature" not in o1
    assert gpt["max_tokens"] == 64 and gpt["temperature"] == 0.5


def test_agent_api_key_from_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with FakeOpenAIServer([Step(200)], models=("gpt-4o",)) as server:
        agent = OpenAIAgent("gpt-4o", server.base_url)
    assert agent.client._client.api_key == "sk-from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    with FakeOpenAIServer([Step(200)], models=("gpt-4o",)) as server:
        assert OpenAIAgent("gpt-4o", server.base_url).client._client.api_key == "EMPTY"
