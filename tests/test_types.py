"""The shared types module and the declared interfaces that replaced probing."""

import pytest

from sweet_rl import types
from sweet_rl.agents.base import AgentOutput
from sweet_rl.environments.backend import BackendEnv
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.evaluation.preferences import GROUND_TRUTH_PREFIX
from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.models.openai_compat import EndpointUnavailable
from sweet_rl.records import Record, Task
from sweet_rl.rollouts.lockstep import run_dialogues
from sweet_rl.simulators.base import Simulator, SimulatorReply
from sweet_rl.stepwise.scoring import ContinuationScorer, SpanScorer
from sweet_rl.stepwise.turns import with_ground_truth
from sweet_rl.stepwise.vllm_backend import VLLMScorer
from tests.serve_helpers import free_port


def test_one_definition_reexported_where_it_used_to_live():
    assert AgentOutput is types.AgentOutput and SimulatorReply is types.SimulatorReply
    assert GROUND_TRUTH_PREFIX is types.GROUND_TRUTH_PREFIX
    assert with_ground_truth("P", "T") == "In light that the final answer is: T.P"


def test_an_unreachable_agent_is_not_called_a_simulator():
    from sweet_rl.agents.openai_agent import OpenAIAgent

    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EndpointUnavailable) as info:
        OpenAIAgent("fake", base_url=url)
    assert type(info.value).__name__ == "EndpointUnavailable" and url in str(info.value)


class _Agent:
    def generate(self, conversations, seeds=None, keys=None):
        return [AgentOutput(prompt="p", output="OUTPUT: I WANT TO ANSWER: def f(): pass")
                for _ in conversations]


class _Human(Simulator):
    def reply_batch(self, conversations, keys=None):
        return [SimulatorReply(text="ok") for _ in conversations]


def _task(i=0):
    return Task(problem_description=f"write f{i}", ground_truth="def f(): pass")


def test_environments_declare_prepare_and_record_workers():
    env = BackendEnv(_task(), "agent prompt", "{problem_description}")
    assert env.record_workers == 1
    assert env.prepare() is None and not env.done  # the base class's set-up does nothing

    class Failing(BackendEnv):
        record_workers = 2

        def prepare(self):
            self.done, self.error = True, "no reference"

    seen = []

    class Bar:
        def update(self, n):
            seen.append(n)

    trajs = run_dialogues([Failing(_task(0), "a", "u"), BackendEnv(_task(1), "a", "u")], _Agent(),
                          _Human(), progress=Bar())
    # a backend row always carries its leak count (none here: the dialogue never started)
    assert trajs[0].extra == {"error": "no reference", "leaked_replies": 0, "leak_turns": []}
    assert len(trajs[0].dialogue_history) == 1
    assert trajs[1].answer != "No answer" and sum(seen) == 2
    assert issubclass(BackendEnv, CollaborationEnv)


def test_scorers_share_score_many():
    assert issubclass(ContinuationScorer, SpanScorer) and issubclass(VLLMScorer, SpanScorer)

    class Counting(SpanScorer):
        def score_spans(self, rows, starts):
            return [(float(len(r) - s), len(r) - s) for r, s in zip(rows, starts)]

    items = [([[1, 2, 3], [1, 2]], [1, 1]), ([[5, 6, 7, 8]], [2])]
    assert Counting().score_many(items) == [[(2.0, 2), (1.0, 1)], [(2.0, 2)]]
    with pytest.raises(NotImplementedError):
        SpanScorer().score_many(items)


def test_writers_tell_records_from_plain_data(tmp_path):
    path = str(tmp_path / "rows.jsonl")
    task = _task()
    assert isinstance(task, Record)
    write_jsonl(path, [task, {"plain": 1}])
    assert read_jsonl(path) == [task.to_dict(), {"plain": 1}]
