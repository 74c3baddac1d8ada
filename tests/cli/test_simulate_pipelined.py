"""simulate with the pipelined loop (the default) against the lockstep one, end to end: the real
tiny agent, a loopback OpenAI-compatible simulator that answers after random delays, rows written
as they finish, and a run killed mid-way and resumed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.io import read_jsonl
from sweet_rl.rollouts.row_writer import pending_path
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step

FLAGS = dict(num_tasks=4, best_of_n=2, max_steps=3, max_new_tokens=6, simulator_max_tokens=16,
             device="cpu", seed=5)


def _slow_server(seed: int, most: float) -> FakeOpenAIServer:
    rng = random.Random(seed)
    return FakeOpenAIServer([Step(delay=rng.uniform(0, most)) for _ in range(200)])


def _run(tiny_model_dir, out, base_url, **extra):
    simulate(SimulateOptions(agent_model=tiny_model_dir, hostname=base_url, env_model="fake",
                             output_path=str(out), **dict(FLAGS, **extra)))
    return out.read_text()


def test_pipelined_rows_equal_lockstep_rows(tiny_model_dir, tmp_path):
    with _slow_server(1, 0.05) as server:
        lockstep = _run(tiny_model_dir, tmp_path / "lockstep.jsonl", server.base_url,
                        rollout="lockstep")
        pipelined = _run(tiny_model_dir, tmp_path / "pipelined.jsonl", server.base_url,
                         generation_batch_size=3, simulator_concurrency=4)
    assert pipelined == lockstep and pipelined.count("\n") == 8
    assert not os.path.exists(pending_path(str(tmp_path / "pipelined.jsonl")))
    sidecar = (tmp_path / "pipelined.jsonl.config.json").read_text()
    assert '"rollout": "pipelined"' in sidecar and '"simulator_concurrency": 4' in sidecar


@pytest.mark.slow
def test_a_killed_pipelined_run_resumes_with_every_row_exactly_once(tiny_model_dir, tmp_path,
                                                                     repo_root):
    out = tmp_path / "traj.jsonl"
    with _slow_server(2, 0.6) as server:
        whole = _run(tiny_model_dir, tmp_path / "whole.jsonl", server.base_url)
        command = [sys.executable, str(repo_root / "scripts" / "simulate_interactions.py"),
                   "--agent_model", tiny_model_dir, "--hostname", server.base_url,
                   "--env_model", "fake", "--output_path", str(out)]
        for name, value in FLAGS.items():
            command += [f"--{name}", str(value)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        pending = pending_path(str(out))
        deadline = time.time() + 120
        finished = 0  # lines in the output and the spill file (a row may be in both)
        while time.time() < deadline and process.poll() is None and finished < 3:
            time.sleep(0.02)
            finished = sum(open(path).read().count("\n") for path in (str(out), pending)
                           if os.path.exists(path))
        alive = process.poll() is None
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        assert alive and finished >= 3, "the run should have been killed part way"
        if os.path.exists(pending):  # a kill in the middle of a write leaves a torn line
            with open(pending, "ab") as handle:
                handle.write(b'{"row": 7, "traject')
        resumed = _run(tiny_model_dir, out, server.base_url, to_continue=True)
    assert resumed == whole
    assert not os.path.exists(pending)
    assert len(read_jsonl(str(out))) == 8


def test_a_finished_run_continued_plays_nothing_in_either_loop(tiny_model_dir, tmp_path):
    # every row already written (as when a run is killed after its last row): nothing to play,
    # no model built, and the file stays as it was
    out = tmp_path / "traj.jsonl"
    with _slow_server(5, 0.0) as server:
        whole = _run(tiny_model_dir, out, server.base_url)
        for rollout in ("pipelined", "lockstep"):
            assert _run(tiny_model_dir, out, server.base_url, to_continue=True,
                        rollout=rollout) == whole, rollout
    assert len(read_jsonl(str(out))) == 8


def test_an_http_agent_gets_concurrent_requests_and_the_same_rows(tiny_model_dir, tmp_path):
    # both sides behind servers that answer after random delays: the agent's requests go out
    # one per thread (``Agent.parallel_requests``) instead of in batches
    flags = dict(FLAGS, agent_backend="openai", agent_model="fake", agent_tokenizer=tiny_model_dir)
    with _slow_server(3, 0.05) as human, _slow_server(4, 0.05) as agent:
        files = {}
        for rollout in ("lockstep", "pipelined"):
            out = tmp_path / f"{rollout}.jsonl"
            simulate(SimulateOptions(hostname=human.base_url, env_model="fake",
                                     agent_base_url=agent.base_url,
                                     output_path=str(out), rollout=rollout, **flags))
            files[rollout] = out.read_text()
        starts = sorted(agent.times[len(agent.times) // 2:])  # the pipelined run's requests
    assert files["pipelined"] == files["lockstep"] and files["lockstep"].count("\n") == 8
    # eight dialogues open at once: their first requests arrive together, not one by one
    assert starts[7] - starts[0] < 0.5
