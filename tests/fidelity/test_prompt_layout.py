"""What the agent and the simulated human see, laid out as the original lays it out.

The original formats the agent's prompt with the tokenizer's chat template over
``[system: agent prompt file verbatim] + dialogue turns`` (task description first), and sends
the simulated human ``[system: "You are a helpful assistant.", user: simulator prompt filled
with the request, the hidden reference and a role:content transcript ending in "agent:"]``.
The expected strings are written out for the tiny test tokenizer, whose chat template is
Llama-3's: each message is ``<|start_header_id|>ROLE<|end_header_id|>\\n\\n`` + content
(trimmed, as Llama-3's template trims) + ``<|eot_id|>``, after one ``<|begin_of_text|>``.
"""

from __future__ import annotations

import pytest

from sweet_rl.agents.hf_agent import HFAgent
from sweet_rl.agents.openai_agent import OpenAIAgent
from sweet_rl.agents.vllm_agent import build_requests
from sweet_rl.environments import BackendEnv
from sweet_rl.models.hf_generation import load_tokenizer
from sweet_rl.records import Task
from sweet_rl.rollouts.lockstep import run_dialogues
from sweet_rl.simulators.base import Simulator, SimulatorReply
from sweet_rl.simulators.local_simulator import LocalSimulator
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step

# An official-style agent prompt: it ends with a literal {dialogue_history}, which the original
# never fills in. It must reach the model exactly as written.
AGENT_PROMPT = "Help the user.\nComplete only the next reply:\n{dialogue_history}"
USER_PROMPT = (
    "Request: {problem_description}\nHidden: {hidden_information}\nSo far:\n{dialogue_history}"
)
TASK = Task(problem_description="Write f(x).", ground_truth="def f(x):\n    return 2 * x",
            test_cases={"test1": "f(1)"})

H = "<|start_header_id|>{}<|end_header_id|>\n\n"
TURN_3_INPUT = (
    "<|begin_of_text|>"
    + H.format("system")
    + "Help the user.\nComplete only the next reply:\n{dialogue_history}<|eot_id|>"
    + H.format("user")
    + "Write f(x).<|eot_id|>"
    + H.format("assistant")
    + "What is x?<|eot_id|>"
    + H.format("user")
    + "A number.<|eot_id|>"
    + H.format("assistant")
    + "Integer or float?<|eot_id|>"
    + H.format("user")
    + "Integer.<|eot_id|>"
    + H.format("assistant")
)
TURN_3_MESSAGES = [
    {"role": "system", "content": AGENT_PROMPT},
    {"role": "user", "content": "Write f(x)."},
    {"role": "assistant", "content": " What is x?"},  # the text after OUTPUT:, not stripped
    {"role": "user", "content": "A number."},
    {"role": "assistant", "content": " Integer or float?"},
    {"role": "user", "content": "Integer."},
]
# The simulated human's view after turn 2 (before it answers "Integer.").
SIMULATOR_TEXT = ("Request: Write f(x).\nHidden: def f(x):\n    return 2 * x\nSo far:\n"
                  "user:Write f(x).\n\n\n\nassistant: What is x?\n\n\n\nuser:A number.\n\n\n\n"
                  "assistant: Integer or float?\n\n\n\nagent:")


class Replies(Simulator):
    def __init__(self, *texts):
        self.texts, self.seen = list(texts), []

    def reply_batch(self, conversations, keys=None):
        self.seen.extend(conversations)
        return [SimulatorReply(text=self.texts.pop(0)) for _ in conversations]


def two_turns_played() -> BackendEnv:
    """A dialogue after two scripted agent turns and two replies."""
    env = BackendEnv(TASK, AGENT_PROMPT, USER_PROMPT, max_steps=3)
    env.record_agent_turn("prompt 1", "I should ask. OUTPUT: What is x?")
    env.record_user_reply(SimulatorReply(text="A number."))
    env.record_agent_turn("prompt 2", "OUTPUT: Integer or float?")
    return env


def test_simulator_messages_are_the_originals_two_messages():
    env = two_turns_played()
    assert env.simulator_messages() == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": SIMULATOR_TEXT}]


def test_in_process_simulator_formats_the_same_two_messages(tiny_model_dir):
    env = two_turns_played()
    simulator = LocalSimulator(tiny_model_dir, max_new_tokens=2, device="cpu")
    prompt = simulator.generator.format(env.simulator_messages())
    assert prompt == (
        "<|begin_of_text|>"
        + H.format("system")
        + "You are a helpful assistant.<|eot_id|>"
        + H.format("user")
        + SIMULATOR_TEXT
        + "<|eot_id|>"
        + H.format("assistant")
    )
    [reply] = simulator.reply_batch([env.simulator_messages()])
    assert reply.error is None and isinstance(reply.text, str)


def test_turn_3_input_of_the_hf_agent_is_the_chat_template_of_six_messages(tiny_model_dir):
    env = two_turns_played()
    env.record_user_reply(SimulatorReply(text="Integer."))
    assert env.agent_messages() == TURN_3_MESSAGES
    agent = HFAgent(tiny_model_dir, max_new_tokens=3, device="cpu")
    [traj] = run_dialogues([env], agent, Replies())  # turn 3 is the last: no reply needed
    assert len(traj.assistant_turns) == 3
    assert traj.dialogue_history[5].input == TURN_3_INPUT


def test_vllm_agent_prompt_is_the_same_text(tiny_model_dir):
    tokenizer = load_tokenizer(tiny_model_dir)
    [(prompt, _)] = build_requests(tokenizer, [TURN_3_MESSAGES], temperature=1.0, max_tokens=8)
    assert prompt == TURN_3_INPUT


def test_openai_agent_sends_the_messages_and_records_the_same_text(tiny_model_dir):
    with FakeOpenAIServer([Step()]) as server:
        agent = OpenAIAgent("fake", server.base_url, api_key="EMPTY", tokenizer=tiny_model_dir)
        [out] = agent.generate([TURN_3_MESSAGES])
        agent.close()
    assert server.requests[-1]["messages"] == TURN_3_MESSAGES
    assert out.prompt == TURN_3_INPUT and out.output == "echo: Integer."


@pytest.mark.parametrize("single_turn", [False, True])
def test_bundled_agent_prompts_are_system_messages_used_verbatim(single_turn):
    from sweet_rl.prompts import load_prompt

    prompt = load_prompt(None, "agent", single_turn=single_turn)
    env = BackendEnv(TASK, prompt, load_prompt(None, "user"))
    assert env.agent_messages() == [{"role": "system", "content": prompt},
                                    {"role": "user", "content": "Write f(x)."}]
