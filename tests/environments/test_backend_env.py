"""The backend environment and the rollout loop with scripted models (units beside the real
model tests in tests/agents and tests/cli)."""

from typing import List

from sweet_rl.agents.base import Agent, AgentOutput
from sweet_rl.environments import BackendEnv
from sweet_rl.prompts import load_prompt
from sweet_rl.records import Task
from sweet_rl.rollout import run_dialogues
from sweet_rl.simulators.base import Simulator, SimulatorReply

TASK = Task(problem_description="Write f. The signature of the function is: def f(x)",
            ground_truth="def f(x):\n    return x + 41", test_cases={"test1": "f(1)"})


class ScriptedAgent(Agent):
    def __init__(self, scripts: List[List[str]]):
        self.scripts = scripts
        self.calls = []

    def generate(self, conversations, seeds=None):
        self.calls.append(conversations)
        outs = []
        for messages in conversations:
            # Which dialogue: the first message holds the task; the turn: assistant count.
            index = int(messages[0]["content"].split("#")[1].split()[0]) if "#" in messages[0]["content"] else 0
            turn = sum(m["role"] == "assistant" for m in messages)
            outs.append(AgentOutput(prompt=f"PROMPT[{index}:{turn}]", output=self.scripts[index][turn]))
        return outs


class ScriptedSimulator(Simulator):
    def __init__(self, reply="x" * 1000, error_on_call=None):
        self.reply, self.error_on_call, self.seen = reply, error_on_call, []

    def reply_batch(self, conversations):
        self.seen.extend(conversations)
        if self.error_on_call is not None and len(self.seen) >= self.error_on_call:
            return [SimulatorReply(text=None, error="HTTP 400: context too long") for _ in conversations]
        return [SimulatorReply(text=self.reply) for _ in conversations]


def _env(index=0, max_steps=10):
    task = Task(problem_description=f"#{index} " + TASK.problem_description,
                ground_truth=TASK.ground_truth, test_cases=TASK.test_cases)
    return BackendEnv(task, load_prompt(None, "agent"), load_prompt(None, "user"), max_steps=max_steps)


def test_dialogue_records_turns_inputs_outputs_and_answer():
    agent = ScriptedAgent([["hmm OUTPUT: What is x?", "ok OUTPUT: I WANT TO ANSWER: def f(x): return x + 41"]])
    simulator = ScriptedSimulator()
    [traj] = run_dialogues([_env()], agent, simulator)
    roles = [t.role for t in traj.dialogue_history]
    assert roles == ["user", "assistant", "user", "assistant"]
    first = traj.dialogue_history[1]
    assert (first.content, first.input, first.output) == ("What is x?", "PROMPT[0:0]", "hmm OUTPUT: What is x?")
    assert len(traj.dialogue_history[2].content) == 400  # replies are cut to 400 characters
    assert traj.answer == "def f(x): return x + 41"
    # The simulator saw the hidden reference and the agent's question, never the thinking.
    [conversation] = simulator.seen
    assert TASK.ground_truth in conversation[0]["content"]
    assert "What is x?" in conversation[0]["content"] and "hmm" not in conversation[0]["content"]
    # The agent's second prompt holds the dialogue as chat messages.
    second_call = agent.calls[1][0]
    assert [m["role"] for m in second_call] == ["user", "assistant", "user"]
    assert second_call[1]["content"] == "What is x?"


def test_ten_turn_limit_makes_the_last_message_the_answer():
    agent = ScriptedAgent([[f"OUTPUT: question {t}?" for t in range(10)]])
    [traj] = run_dialogues([_env()], agent, ScriptedSimulator(reply="I don't know."))
    assert len(traj.assistant_turns) == 10
    assert traj.answer == "question 9?"


def test_batched_dialogues_finish_at_different_turns():
    scripts = [["OUTPUT: I WANT TO ANSWER: a"], ["OUTPUT: q?", "OUTPUT: I WANT TO ANSWER: b"]]
    agent = ScriptedAgent(scripts)
    trajs = run_dialogues([_env(0), _env(1)], agent, ScriptedSimulator(reply="fine"))
    assert [t.answer for t in trajs] == ["a", "b"]
    assert [len(call) for call in agent.calls] == [2, 1]  # finished dialogues leave the batch


def test_rejected_simulator_request_ends_dialogue_with_recorded_error():
    agent = ScriptedAgent([["OUTPUT: q1?", "OUTPUT: q2?"]])
    [traj] = run_dialogues([_env()], agent, ScriptedSimulator(error_on_call=1))
    assert traj.extra["error"] == "simulator: HTTP 400: context too long"
    assert traj.dialogue_history[-1].role == "assistant" and traj.answer == ""
    assert "No response" not in traj.to_dict().__repr__()


def test_single_turn_setting_answers_at_once():
    env = BackendEnv(TASK, load_prompt(None, "agent", single_turn=True), load_prompt(None, "user"), max_steps=1)
    assert "cannot ask" in env.agent_messages()[0]["content"]
    agent = ScriptedAgent([["OUTPUT: def f(x): return x"]])
    [traj] = run_dialogues([env], agent, ScriptedSimulator())
    assert traj.answer == "def f(x): return x" and len(traj.dialogue_history) == 2
