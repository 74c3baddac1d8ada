"""The backend environment and the rollout loop with scripted models (units beside the real
model tests in tests/agents and tests/cli)."""

from typing import List

from sweet_rl.agents.base import Agent, AgentOutput
from sweet_rl.environments import BackendEnv
from sweet_rl.prompts import load_prompt
from sweet_rl.records import Task
from sweet_rl.rollouts.lockstep import run_dialogues
from sweet_rl.simulators.base import Simulator, SimulatorReply

TASK = Task(problem_description="Write f. The signature of the function is: def f(x)",
            ground_truth="def f(x):\n    return x + 41", test_cases={"test1": "f(1)"})


class ScriptedAgent(Agent):
    def __init__(self, scripts: List[List[str]]):
        self.scripts = scripts
        self.calls = []

    def generate(self, conversations, seeds=None, keys=None):
        self.calls.append(conversations)
        outs = []
        for messages in conversations:
            # Which dialogue: the first user message holds the task; the turn: assistant count.
            request = messages[1]["content"]
            index = int(request.split("#")[1].split()[0]) if "#" in request else 0
            turn = sum(m["role"] == "assistant" for m in messages)
            outs.append(
                AgentOutput(prompt=f"PROMPT[{index}:{turn}]", output=self.scripts[index][turn])
            )
        return outs


class ScriptedSimulator(Simulator):
    def __init__(self, reply="x" * 1000, error_on_call=None):
        self.reply, self.error_on_call, self.seen = reply, error_on_call, []

    def reply_batch(self, conversations, keys=None):
        self.seen.extend(conversations)
        if self.error_on_call is not None and len(self.seen) >= self.error_on_call:
            return [
                SimulatorReply(text=None, error="HTTP 400: context too long") for _ in conversations
            ]
        return [SimulatorReply(text=self.reply) for _ in conversations]


def _env(index=0, max_steps=10):
    task = Task(problem_description=f"#{index} " + TASK.problem_description,
                ground_truth=TASK.ground_truth, test_cases=TASK.test_cases)
    return BackendEnv(
        task, load_prompt(None, "agent"), load_prompt(None, "user"), max_steps=max_steps
    )


def test_dialogue_records_turns_inputs_outputs_and_answer():
    agent = ScriptedAgent(
        [["hmm OUTPUT: What is x?", "ok OUTPUT: I WANT TO ANSWER: def f(x): return x + 41"]]
    )
    simulator = ScriptedSimulator()
    [traj] = run_dialogues([_env()], agent, simulator)
    roles = [t.role for t in traj.dialogue_history]
    assert roles == ["user", "assistant", "user", "assistant"]
    first = traj.dialogue_history[1]
    # The message is the text after OUTPUT:, not stripped (as in the original).
    assert (first.content, first.input, first.output) == (
        " What is x?",
        "PROMPT[0:0]",
        "hmm OUTPUT: What is x?",
    )
    assert len(traj.dialogue_history[2].content) == 400  # replies are cut to 400 characters
    assert traj.answer == " def f(x): return x + 41"
    # The simulator: a generic system message, then its prompt filled with the request, the
    # hidden reference and the transcript (role:content + four newlines per turn, then
    # "agent:"); it sees the agent's question, never its thinking.
    [conversation] = simulator.seen
    assert conversation[0] == {"role": "system", "content": "You are a helpful assistant."}
    transcript = f"user:#0 {TASK.problem_description}\n\n\n\nassistant: What is x?\n\n\n\nagent:"
    expected = (
        load_prompt(None, "user")
        .replace("{problem_description}", f"#0 {TASK.problem_description}")
        .replace("{hidden_information}", TASK.ground_truth)
        .replace("{dialogue_history}", transcript)
    )
    assert conversation[1] == {"role": "user", "content": expected}
    assert "hmm" not in conversation[1]["content"]
    # The agent's second prompt: its prompt file as the system message, then the dialogue.
    second_call = agent.calls[1][0]
    assert [m["role"] for m in second_call] == ["system", "user", "assistant", "user"]
    assert second_call[0]["content"] == load_prompt(None, "agent")
    assert second_call[2]["content"] == " What is x?"


def test_ten_turn_limit_makes_the_last_message_the_answer():
    agent = ScriptedAgent([[f"OUTPUT: question {t}?" for t in range(10)]])
    [traj] = run_dialogues([_env()], agent, ScriptedSimulator(reply="I don't know."))
    assert len(traj.assistant_turns) == 10
    assert traj.answer == " question 9?"


def test_batched_dialogues_finish_at_different_turns():
    scripts = [["OUTPUT: I WANT TO ANSWER: a"], ["OUTPUT: q?", "OUTPUT: I WANT TO ANSWER: b"]]
    agent = ScriptedAgent(scripts)
    trajs = run_dialogues([_env(0), _env(1)], agent, ScriptedSimulator(reply="fine"))
    assert [t.answer for t in trajs] == [" a", " b"]
    assert [len(call) for call in agent.calls] == [2, 1]  # finished dialogues leave the batch


def test_rejected_simulator_request_gets_the_originals_reply_and_is_recorded():
    # The original's human says "No response." and the dialogue goes on to the turn limit.
    agent = ScriptedAgent([["OUTPUT: q1?", "OUTPUT: q2?", "OUTPUT: q3"]])
    [traj] = run_dialogues([_env(max_steps=3)], agent, ScriptedSimulator(error_on_call=2))
    assert [t.content for t in traj.dialogue_history[2::2]] == ["x" * 400, "No response."]
    assert traj.answer == " q3" and "error" not in traj.extra
    assert traj.extra["simulator_errors"] == ["simulator: HTTP 400: context too long"]


def test_rejected_simulator_request_can_end_the_dialogue_instead():
    agent = ScriptedAgent([["OUTPUT: q1?", "OUTPUT: q2?"]])
    env = BackendEnv(
        TASK, load_prompt(None, "agent"), load_prompt(None, "user"), rejected_reply=None
    )
    [traj] = run_dialogues([env], agent, ScriptedSimulator(error_on_call=1))
    assert traj.extra["error"] == "simulator: HTTP 400: context too long"
    assert traj.dialogue_history[-1].role == "assistant" and traj.answer == "No answer"
    assert "No response" not in traj.to_dict().__repr__()


def test_single_turn_setting_answers_at_once():
    env = BackendEnv(
        TASK, load_prompt(None, "agent", single_turn=True), load_prompt(None, "user"), max_steps=1
    )
    messages = env.agent_messages()
    assert messages[0]["role"] == "system" and "cannot ask" in messages[0]["content"]
    assert messages[1:] == [{"role": "user", "content": TASK.problem_description}]
    agent = ScriptedAgent([["OUTPUT: def f(x): return x"]])
    [traj] = run_dialogues([env], agent, ScriptedSimulator())
    assert traj.answer == " def f(x): return x" and len(traj.dialogue_history) == 2
