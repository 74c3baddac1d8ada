"""The turn protocol as a state machine (sweet_rl/rollouts/dialogue.py), and the two drivers of
it: the lockstep loop's call pattern (one batched agent call per turn, the original's) and the
pipelined loop's rows, equal to lockstep's with leaking replies asked for again."""

from __future__ import annotations

import pytest

from sweet_rl.agents.base import Agent
from sweet_rl.rollouts.dialogue import (AgentCall, Dialogue, EnvCall, SimulatorCall, agent_outputs,
                               simulator_replies)
from sweet_rl.environments.backend import BackendEnv
from sweet_rl.environments.leaks import RESAMPLE_REMINDER
from sweet_rl.rollouts.pipeline import run_pipelined
from sweet_rl.records import Task
from sweet_rl.rollouts.lockstep import run_dialogues
from sweet_rl.simulators.base import Simulator
from sweet_rl.types import AgentOutput, SimulatorReply

REFERENCE = "def f(x):\n    return x + 1\n"
PASTE = "```\nreturn x + 1\n```"  # a fenced reply always leaks
HUMAN_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def _env(request="write f", **kwargs):
    return BackendEnv(Task(problem_description=request, ground_truth=REFERENCE), "agent prompt",
                      "{dialogue_history}", **kwargs)


def _run_env_call(dialogue):
    call = dialogue.call()
    assert isinstance(call, EnvCall)
    return dialogue.advance(call.run())


def _ask(dialogue, text, prompt="P"):
    """The agent's turn: its output, then the recording; returns the state after both."""
    assert isinstance(dialogue.call(), AgentCall)
    assert dialogue.advance(AgentOutput(prompt=prompt, output=text)) == "recording"
    return _run_env_call(dialogue)


def test_one_turn_moves_through_every_state_with_the_calls_it_needs():
    env = _env()
    dialogue = Dialogue(env, row_seed=7, key=42)
    assert dialogue.state == "preparing" and dialogue.call() == EnvCall(env.prepare)
    assert _run_env_call(dialogue) == "generating"
    assert dialogue.call() == AgentCall(
        [{"role": "system", "content": "agent prompt"}, {"role": "user", "content": "write f"}],
        seed=7000021, key=42)  # turn_seed(7, 0) = 7 * 1000003
    assert dialogue.call() == dialogue.call()  # asking again changes nothing
    assert dialogue.advance(AgentOutput("P1", "hmm OUTPUT: what is x?")) == "recording"
    assert len(env.history) == 1  # stored only by the recording call
    assert _run_env_call(dialogue) == "interacting"
    assert dialogue.call() == SimulatorCall(
        [HUMAN_SYSTEM, {"role": "user", "content":
                        "user:write f\n\n\n\nassistant: what is x?\n\n\n\nagent:"}], key=42)
    assert dialogue.advance(SimulatorReply("a number")) == "generating"
    assert dialogue.call().seed == 7000022  # turn 1
    assert [(t.role, t.content) for t in env.history] == [
        ("user", "write f"), ("assistant", " what is x?"), ("user", "a number")]
    assert env.history[1].input == "P1" and env.history[1].output == "hmm OUTPUT: what is x?"


def test_an_answer_ends_the_dialogue_after_it_is_recorded():
    env = _env()
    dialogue = Dialogue(env, 0, 0)
    _run_env_call(dialogue)
    assert _ask(dialogue, "OUTPUT: I WANT TO ANSWER: def f(x): return x + 1") == "done"
    assert dialogue.done and env.answer == " def f(x): return x + 1"
    with pytest.raises(RuntimeError, match="over"):
        dialogue.call()
    with pytest.raises(RuntimeError, match="over"):
        dialogue.advance(SimulatorReply("late"))


def test_the_tenth_agent_turn_is_the_last_and_its_message_the_answer():
    env = _env()
    dialogue = Dialogue(env, 3, 0)
    _run_env_call(dialogue)
    states = []
    for turn in range(10):
        states.append(_ask(dialogue, f"OUTPUT: question {turn}"))
        if not dialogue.done:
            states.append(dialogue.advance(SimulatorReply(f"reply {turn}")))
    assert states == ["interacting", "generating"] * 9 + ["done"]
    assert env.steps == 10 and env.answer == " question 9"
    assert [t.role for t in env.history] == ["user"] + ["assistant", "user"] * 9 + ["assistant"]


def test_a_leaking_reply_is_asked_for_again_with_the_reminder_up_to_the_allowance():
    env = _env(resample_leaks=1)
    dialogue = Dialogue(env, 0, 5)
    _run_env_call(dialogue)
    _ask(dialogue, "OUTPUT: how?")
    first = dialogue.call().messages[1]["content"]
    assert not first.endswith(RESAMPLE_REMINDER)
    assert dialogue.advance(SimulatorReply(PASTE)) == "interacting"  # asked again
    assert dialogue.call() == SimulatorCall(
        [HUMAN_SYSTEM, {"role": "user", "content": first + "\n\n" + RESAMPLE_REMINDER}], key=5)
    assert len(env.history) == 2  # the leaking reply was not stored
    assert dialogue.advance(SimulatorReply(PASTE)) == "generating"  # allowance spent: stored
    assert env.history[-1].content == PASTE
    _ask(dialogue, "OUTPUT: and then?")
    assert not dialogue.call().messages[1]["content"].endswith(RESAMPLE_REMINDER)  # a new turn
    assert dialogue.advance(SimulatorReply("plus one")) == "generating"
    assert env.trajectory().extra == {"leaked_replies": 1, "leak_turns": [2],
                                      "leak_resamples": 1}


def test_a_set_up_that_fails_ends_the_dialogue_before_the_agent_speaks():
    class NoReference(BackendEnv):
        def prepare(self):
            self.done, self.error = True, "the reference did not render"

    env = NoReference(Task(problem_description="write f", ground_truth=REFERENCE), "a", "u")
    dialogue = Dialogue(env, 0, 0)
    assert dialogue.state == "preparing"
    assert _run_env_call(dialogue) == "done"
    assert env.steps == 0 and len(env.history) == 1
    assert env.trajectory().extra["error"] == "the reference did not render"


def test_a_finished_environment_starts_done_and_a_rejection_may_end_a_dialogue():
    env = _env(rejected_reply=None)
    dialogue = Dialogue(env, 0, 0)
    _run_env_call(dialogue)
    _ask(dialogue, "OUTPUT: how?")
    assert dialogue.advance(SimulatorReply(None, error="HTTP 400")) == "done"
    assert env.trajectory().extra["error"] == "simulator: HTTP 400"
    assert Dialogue(env, 0, 0).state == "done"  # e.g. a restored row: nothing to play
    going_on = Dialogue(_env(), 0, 0)  # the original's rejection: the human says so, goes on
    _run_env_call(going_on)
    _ask(going_on, "OUTPUT: how?")
    assert going_on.advance(SimulatorReply(None, error="HTTP 400")) == "generating"
    assert going_on.env.history[-1].content == "No response."


def test_batched_calls_refuse_a_model_that_drops_a_request():
    class Short(Agent, Simulator):
        def generate(self, conversations, seeds=None, keys=None):
            return [AgentOutput("p", "OUTPUT: x")]

        def reply_batch(self, conversations, keys=None):
            return []

    calls = [AgentCall([], 0, 0), AgentCall([], 1, 1)]
    with pytest.raises(RuntimeError, match="agent returned 1 results for 2 requests"):
        agent_outputs(Short(), calls)
    with pytest.raises(RuntimeError, match="simulator returned 0 results for 1 requests"):
        simulator_replies(Short(), [SimulatorCall([], 0)])


# -- the drivers ----------------------------------------------------------------------------
class CountingAgent(Agent):
    """Asks until the dialogue holds as many human replies as the last word of the request,
    then answers; logs every call's keys and seeds in ``log`` (shared with the human)."""

    def __init__(self, log=None):
        self.calls = [] if log is None else log

    def generate(self, conversations, seeds=None, keys=None):
        self.calls.append(("agent", list(keys), list(seeds)))
        outputs = []
        for messages in conversations:
            wanted = int(messages[1]["content"].split()[-1])
            told = sum(m["role"] == "user" for m in messages[2:])
            text = "OUTPUT: I WANT TO ANSWER: done" if told >= wanted else f"OUTPUT: q{told}"
            outputs.append(AgentOutput(prompt="p", output=text))
        return outputs


class PastingHuman(Simulator):
    """Pastes the code in its first reply to dialogue key 11 (unless reminded); else agrees."""

    def __init__(self, log=None):
        self.calls = [] if log is None else log

    def reply_batch(self, conversations, keys=None):
        self.calls.append(("simulator", list(keys)))
        replies = []
        for messages, key in zip(conversations, keys):
            text = messages[1]["content"]
            first = text.count("assistant:") == 1 and RESAMPLE_REMINDER not in text
            replies.append(SimulatorReply(PASTE if key == 11 and first else "fine"))
        return replies


def _three(lengths=(0, 2, 1)):
    return [_env(f"task {n}", resample_leaks=1) for n in lengths]


def test_lockstep_makes_one_batched_agent_call_per_turn_and_finishes_resamples_first():
    log, finished = [], []

    class Bar:
        def update(self, n):
            finished.append(n)

    trajectories = run_dialogues(_three(), CountingAgent(log), PastingHuman(log),
                                 row_seeds=[0, 1, 2], progress=Bar(), keys=[10, 11, 12])
    assert [call[:2] for call in log] == [
        ("agent", [10, 11, 12]), ("simulator", [11, 12]), ("simulator", [11]),  # the resample
        ("agent", [11, 12]), ("simulator", [11]), ("agent", [11])]
    assert [call[2] for call in log if call[0] == "agent"] == [[0, 1000003, 2000006],
                                                               [1000004, 2000007], [1000005]]
    assert finished == [1, 1, 1]  # one by one, as each dialogue ends
    assert [len(t.assistant_turns) for t in trajectories] == [1, 3, 2]
    assert trajectories[1].extra["leak_resamples"] == 1


def test_pipelined_rows_equal_lockstep_rows_with_resamples():
    lockstep = run_dialogues(_three(), CountingAgent(), PastingHuman(), row_seeds=[4, 5, 6],
                             keys=[10, 11, 12])
    rows = {}
    run_pipelined(_three(), CountingAgent(), PastingHuman(), [4, 5, 6], rows.__setitem__,
                  agent_batch=2, keys=[10, 11, 12])
    assert [rows[i].to_dict() for i in range(3)] == [t.to_dict() for t in lockstep]
    assert lockstep[1].extra == {"leaked_replies": 0, "leak_turns": [], "leak_resamples": 1}


@pytest.mark.parametrize("rollout", ["lockstep", "pipelined"])
def test_an_agent_error_stops_either_driver_with_that_error(rollout):
    class Broken(CountingAgent):
        def generate(self, conversations, seeds=None, keys=None):
            if len(self.calls) == 1:  # the second call
                raise ConnectionError("the agent went away")
            return super().generate(conversations, seeds, keys)

    finished = []
    with pytest.raises(ConnectionError, match="went away"):
        if rollout == "lockstep":
            run_dialogues(_three(), Broken(), PastingHuman())
        else:
            run_pipelined(_three(), Broken(), PastingHuman(), [0, 1, 2],
                          lambda i, t: finished.append(i), agent_batch=3)
    assert finished in ([], [0])  # only a dialogue that answered at its first turn finished
