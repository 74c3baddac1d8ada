"""The ``hf`` agent and the local simulator on the real tiny transformers model."""

import pytest

from sweet_rl.agents.hf_agent import HFAgent
from sweet_rl.simulators.local_simulator import LocalSimulator

CONVERSATIONS = [
    [{"role": "user", "content": "Write a function that adds two numbers."}],
    [
        {"role": "user", "content": "Write f."},
        {"role": "assistant", "content": "What should f return?"},
        {"role": "user", "content": "The sum, I think."},
    ],
]


@pytest.fixture(scope="module")
def agent(tiny_model_dir):
    return HFAgent(tiny_model_dir, temperature=1.0, max_new_tokens=12, device="cpu", batch_size=8)


def test_prompt_is_the_chat_template_and_outputs_are_text(agent):
    outputs = agent.generate(CONVERSATIONS, seeds=[1, 2])
    assert len(outputs) == 2
    first = outputs[0].prompt
    assert first.startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n")
    assert first.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert outputs[1].prompt.count("<|start_header_id|>assistant<|end_header_id|>") == 2
    for out in outputs:
        assert isinstance(out.output, str) and "<|eot_id|>" not in out.output


def test_same_seeds_same_samples_and_batching_matches_single(agent):
    a = [o.output for o in agent.generate(CONVERSATIONS, seeds=[5, 6])]
    b = [o.output for o in agent.generate(CONVERSATIONS, seeds=[5, 6])]
    assert a == b


def test_greedy_simulator_is_deterministic_and_left_padding_is_harmless(agent, tiny_model_dir):
    simulator = LocalSimulator(tiny_model_dir, max_new_tokens=10, generator=agent.generator)
    batch = [r.text for r in simulator.reply_batch(CONVERSATIONS)]
    alone = [simulator.reply_batch([c])[0].text for c in CONVERSATIONS]
    assert batch == alone  # padding in a batch does not change greedy replies
    assert all(isinstance(t, str) for t in batch)
