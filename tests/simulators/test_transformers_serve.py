"""The HTTP simulator and agent against a REAL `transformers serve` running the tiny model.

One server for the whole module: starting it (interpreter, torch, model load) takes seconds.
"""

import re

import pytest

from sweet_rl.agents.openai_agent import OpenAIAgent
from sweet_rl.models.openai_compat import ModelNotServed
from sweet_rl.simulators.openai_simulator import OpenAISimulator
from tests.serve_helpers import build_tiny, transformers_serve

pytestmark = pytest.mark.slow  # a real transformers serve

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

CONVERSATIONS = [
    [{"role": "user", "content": "Write a function that adds two numbers."}],
    [{"role": "system", "content": "You are a helpful human."},
     {"role": "user", "content": "What should the function return?"}],
    [{"role": "user", "content": "def f(x):"},
     {"role": "assistant", "content": "Do you want x squared?"},
     {"role": "user", "content": "I WANT TO ANSWER: yes"}],
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    model_dir = build_tiny(tmp_path_factory.mktemp("serve"))
    with transformers_serve(model_dir) as base_url:
        yield model_dir, base_url


def test_simulator_replies_through_transformers_serve(served):
    model_dir, base_url = served
    # `transformers serve MODEL` only answers requests naming exactly MODEL.
    simulator = OpenAISimulator(model_dir, base_url=base_url, max_tokens=16)
    replies = simulator.reply_batch(CONVERSATIONS)
    again = simulator.reply_batch(CONVERSATIONS)
    simulator.close()
    assert len(replies) == 3
    for reply in replies:
        assert reply.error is None and isinstance(reply.text, str)
    # Temperature 0 is greedy decoding on this server: the same dialogue, the same answer.
    assert [r.text for r in again] == [r.text for r in replies]


def test_wrong_model_name_is_refused_at_start_with_the_served_names(served):
    model_dir, base_url = served
    # the model list says what the server serves: a wrong name stops the run before any work
    with pytest.raises(ModelNotServed, match=r"does not serve a model named 'some-other-model'; "
                                             r"it serves: .*" + re.escape(model_dir)):
        OpenAISimulator("some-other-model", base_url=base_url, max_tokens=4)
    # unchecked, every request would be refused instead (what a run used to do silently)
    simulator = OpenAISimulator("some-other-model", base_url=base_url, max_tokens=4,
                                check=False)
    [reply] = simulator.reply_batch(CONVERSATIONS[:1])
    assert reply.text is None and "400" in reply.error and "pinned" in reply.error


def test_agent_through_transformers_serve_records_chat_template_prompt(served):
    from transformers import AutoTokenizer

    model_dir, base_url = served
    agent = OpenAIAgent(model_dir, base_url, api_key="EMPTY", temperature=1.0, max_tokens=16,
                        tokenizer=model_dir)
    outputs = agent.generate(CONVERSATIONS, seeds=[1, 2, 3])
    agent.close()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert len(outputs) == 3
    for messages, out in zip(CONVERSATIONS, outputs):
        assert out.prompt == tokenizer.apply_chat_template(messages, tokenize=False,
                                                           add_generation_prompt=True)
        assert out.prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
        assert isinstance(out.output, str)
