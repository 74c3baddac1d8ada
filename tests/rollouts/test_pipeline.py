"""Pipelined rollouts (sweet_rl/rollouts/pipeline.py) give the lockstep loop's trajectories, row
for row.

Two levels: the loops themselves with small stand-in models whose reply times are random (so
dialogues finish in a scrambled order), and simulate end to end with the real tiny agent and
a loopback OpenAI-compatible simulator that answers after random delays.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from sweet_rl.agents.base import Agent
from sweet_rl.environments import make_env
from sweet_rl.records import Task
from sweet_rl.rollouts.lockstep import run_dialogues
from sweet_rl.rollouts.pipeline import run_pipelined
from sweet_rl.simulators.base import Simulator
from sweet_rl.types import AgentOutput, SimulatorReply


class LengthAgent(Agent):
    """Asks until the dialogue has as many human replies as the task's number, then answers;
    every message carries its seed, so a wrong seed shows in the trajectory."""

    def __init__(self):
        self.batches = []

    def generate(self, conversations, seeds=None, keys=None):
        self.batches.append(len(conversations))
        time.sleep(random.uniform(0, 0.01))
        outputs = []
        for messages, seed in zip(conversations, seeds):
            wanted = int(messages[1]["content"].split()[-1])
            told = sum(m["role"] == "user" for m in messages[2:])
            text = (f"OUTPUT: I WANT TO ANSWER: answer {seed}" if told >= wanted
                    else f"OUTPUT: question {told} {seed}")
            outputs.append(AgentOutput(prompt=f"prompt {len(messages)}", output=text))
        return outputs


class SlowHuman(Simulator):
    """Answers each request after a random delay; serves requests in parallel."""

    parallel_requests = True

    def __init__(self):
        self.lock = threading.Lock()
        self.keys = []

    def reply_batch(self, conversations, keys=None):
        time.sleep(random.uniform(0, 0.03))
        with self.lock:
            self.keys.extend(keys or [])
        return [SimulatorReply(text=f"reply to {len(m[-1]['content'])} chars")
                for m in conversations]


def _envs(lengths):
    tasks = [Task(problem_description=f"task {n}", ground_truth="def f(): pass")
             for n in lengths]
    return [make_env("code", task, "agent prompt", "{dialogue_history}", max_steps=10)
            for task in tasks]


def test_pipelined_dialogues_equal_lockstep_row_for_row():
    lengths = [random.Random(3).randint(0, 9) for _ in range(40)]
    seeds = [1000 + 7 * i for i in range(len(lengths))]
    lockstep = run_dialogues(_envs(lengths), LengthAgent(), SlowHuman(), row_seeds=seeds)
    finished = []
    human, agent = SlowHuman(), LengthAgent()
    envs = _envs(lengths)
    run_pipelined(envs, agent, human, seeds, lambda i, t: finished.append((i, t)),
                  window=12, agent_batch=5, simulator_concurrency=6,
                  keys=[100 + i for i in range(len(envs))])
    assert sorted(i for i, _ in finished) == list(range(len(lengths)))
    assert [i for i, _ in finished] != sorted(i for i, _ in finished)  # finished out of order
    by_row = dict(finished)
    assert [by_row[i].to_dict() for i in range(len(lengths))] == [t.to_dict() for t in lockstep]
    assert max(agent.batches) <= 5 and sum(agent.batches) == sum(n + 1 for n in lengths)
    assert set(human.keys) == {100 + i for i, n in enumerate(lengths) if n > 0}


def test_the_window_bounds_how_many_dialogues_are_open():
    tasks = [Task(problem_description=f"task{i} 3", ground_truth="") for i in range(10)]
    envs = [make_env("code", t, "agent prompt", "{dialogue_history}") for t in tasks]
    started, ended, most = set(), [0], [0]

    class Watching(LengthAgent):
        def generate(self, conversations, seeds=None, keys=None):
            started.update(m[1]["content"] for m in conversations)
            most[0] = max(most[0], len(started) - ended[0])
            return super().generate(conversations, seeds, keys)

    def finish(i, trajectory):
        ended[0] += 1

    run_pipelined(envs, Watching(), SlowHuman(), list(range(10)), finish, window=2)
    assert all(env.done for env in envs) and ended[0] == 10
    assert most[0] == 2  # two at a time: never more, and the window was used


def test_an_error_in_a_model_call_stops_the_run_with_that_error():
    class Broken(SlowHuman):
        def reply_batch(self, conversations, keys=None):
            raise ConnectionError("the simulator went away")

    with pytest.raises(ConnectionError, match="went away"):
        run_pipelined(_envs([2, 2]), LengthAgent(), Broken(), [0, 1], lambda i, t: None)
