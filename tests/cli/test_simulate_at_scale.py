"""simulate at scale, end to end with the real tiny agent and loopback simulator servers:
shards joined by merge equal one run; several servers, one of which dies mid-run, equal one
server; the leak meter's counts and metrics, and resampling a leaking reply."""

from __future__ import annotations

import json

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.io import read_jsonl
from sweet_rl.environments.leaks import RESAMPLE_REMINDER
from sweet_rl.stages.sharding import merge_shards
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step, completion

FLAGS = dict(num_tasks=3, best_of_n=2, max_steps=3, max_new_tokens=6, simulator_max_tokens=16,
             device="cpu", seed=3, env_model="fake")


def _stages(path) -> dict:
    with open(str(path) + ".config.json") as handle:
        return json.load(handle)


def test_shards_merged_equal_one_run(tiny_model_dir, tmp_path):
    with FakeOpenAIServer([Step()]) as server:
        one = tmp_path / "one.jsonl"
        simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=server.base_url,
                                 output_path=str(one), **FLAGS))
        shards = []
        for index in (1, 0):  # any order
            shard = tmp_path / f"shard{index}.jsonl"
            simulate(SimulateOptions(
                agent_model=tiny_model_dir, hostname=server.base_url, output_path=str(shard),
                num_shards=2, shard_index=index, **FLAGS))
            shards.append(str(shard))
    assert len(read_jsonl(shards[1])) == 3 and len(read_jsonl(shards[0])) == 3
    merged = tmp_path / "merged.jsonl"
    merge_shards(shards, str(merged))
    assert merged.read_bytes() == one.read_bytes()
    whole = _stages(one)["stages"]["simulate"]
    joined = _stages(merged)["stages"]["simulate"]
    assert whole.pop("output_path") != joined.pop("output_path")
    assert joined == whole and whole["shard_rows"] == [0, 6, 6]


@pytest.mark.slow(about=10)
def test_a_server_that_dies_mid_run_hands_its_dialogues_to_the_other(tiny_model_dir, tmp_path,
                                                                    monkeypatch):
    from sweet_rl.models.openai_compat import ChatClient

    # the retries' waits (1, 2, 4, ... s) are not what this checks: 10 ms each
    monkeypatch.setattr(ChatClient, "_delay", lambda self, attempt, err=None: 0.01)
    with FakeOpenAIServer([Step()]) as steady:
        alone = tmp_path / "alone.jsonl"
        simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=steady.base_url,
                                 output_path=str(alone), **FLAGS))
        # the second server answers three requests, then hangs up on every later one
        with FakeOpenAIServer([Step(), Step(), Step(), Step(hang_up=True)]) as dying:
            both = tmp_path / "both.jsonl"
            simulate(SimulateOptions(agent_model=tiny_model_dir,
                                     hostname=f"{steady.base_url},{dying.base_url}",
                                     output_path=str(both), **FLAGS))
            assert dying.attempts > 3  # it was given work after it died, and gave it back
    assert both.read_bytes() == alone.read_bytes()


def test_leaking_replies_are_counted_and_can_be_asked_for_again(tiny_model_dir, tmp_path,
                                                                capsys):
    code = completion("Here it is:\n```python\ndef f(x):\n    return x\n```")
    plain = completion("It should return the number it is given.")
    flags = dict(FLAGS, num_tasks=1, best_of_n=1, max_steps=2)
    with FakeOpenAIServer([Step(body=code)]) as server:
        kept = tmp_path / "kept.jsonl"
        simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=server.base_url,
                                 output_path=str(kept), **flags))
    [row] = read_jsonl(str(kept))
    assert row["leaked_replies"] == 1 and row["leak_turns"] == [2]
    assert "leak rate 1.000 (1 of 1 replies)" in capsys.readouterr().out
    with FakeOpenAIServer([Step(body=code), Step(body=plain)]) as server:
        asked = tmp_path / "asked.jsonl"
        simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=server.base_url,
                                 output_path=str(asked), resample_leaks=2, **flags))
        prompts = [body["messages"][-1]["content"] for body in server.requests]
    [row] = read_jsonl(str(asked))
    assert row["leaked_replies"] == 0 and row["leak_resamples"] == 1
    assert row["dialogue_history"][2]["content"] == "It should return the number it is given."
    assert len(prompts) == 2 and not prompts[0].endswith(RESAMPLE_REMINDER)
    assert prompts[1].endswith(RESAMPLE_REMINDER)
    assert "leak rate 0.000 (0 of 1 replies)" in capsys.readouterr().out
