"""The paper's set-up: vLLM's OpenAI-compatible server as the simulated human (what
``vllm serve MODEL`` runs, started here on loopback with the tiny Llama, served as ``tiny``),
and ``simulate_interactions.py --hostname 127.0.0.1 --port P --env_model tiny`` against it:

* with ``--agent_backend vllm`` (the script in its own process, vLLM's spawned engine): the
  rows the ``hf`` agent writes against the same server, greedy;
* against two servers (``--hostname a,b``): every dialogue is the one-server run's, and both
  servers answered.

The servers are shared by the session and torn down at its end (tests/vllm/conftest.py checks
that no process of theirs is left).
"""

import json
import urllib.request

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from tests.vllm.conftest import SERVED_NAME, run_script

pytestmark = [pytest.mark.vllm, pytest.mark.slow]  # vLLM's engine, for real

TASKS, STEPS = 4, 2
FLAGS = dict(num_tasks=TASKS, max_steps=STEPS, max_new_tokens=8, simulator_max_tokens=12,
             temperature=0.0, seed=0)
# Agent turns (of 4 dialogues x 2 turns) whose reply is the hf agent's, character for
# character: a reply both backends write alike gets the same human reply from the greedy
# server, so the next turn's prompt is the same too. Measured: 8 of 8.
SAME_REPLIES_AT_LEAST = 7


def _rows(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _answered(url):
    """Requests the server at ``url`` (host:port) finished, from its Prometheus metrics."""
    with urllib.request.urlopen(f"http://{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


@pytest.fixture(scope="module")
def hosts(servers):
    urls = servers.urls()
    with urllib.request.urlopen(f"http://{urls[0]}/v1/models", timeout=10) as response:
        assert [m["id"] for m in json.load(response)["data"]] == [SERVED_NAME]
    return urls


@pytest.fixture(scope="module")
def hf_rows(tmp_path_factory, hosts, vllm_model):
    """The hf agent's dialogues against the first server."""
    out = str(tmp_path_factory.mktemp("hf") / "hf.jsonl")
    simulate(SimulateOptions(hostname=hosts[0], env_model=SERVED_NAME, agent_model=vllm_model,
                             agent_backend="hf", output_path=out, device="cpu", **FLAGS))
    return _rows(out)


def test_the_vllm_agent_against_a_vllm_server_writes_the_hf_agents_rows(tmp_path, hosts,
                                                                         vllm_model, hf_rows):
    host, port = hosts[0].split(":")
    out = str(tmp_path / "vllm.jsonl")
    flags = [f"--{key}={value}" for key, value in FLAGS.items()]
    result = run_script(["scripts/simulate_interactions.py", "--agent_backend", "vllm",
                         "--agent_model", vllm_model, "--hostname", host, "--port", port,
                         "--env_model", SERVED_NAME, "--output_path", out] + flags)
    assert f"simulate: {TASKS} dialogues" in result.stdout
    rows = _rows(out)
    assert [sorted(r) for r in rows] == [sorted(r) for r in hf_rows]  # the same fields
    same = 0
    for row, theirs in zip(rows, hf_rows):
        assert "error" not in row and not row.get("simulator_errors")
        assert row["task"] == theirs["task"]
        history = row["dialogue_history"]
        assert [t["role"] for t in history][:3] == ["user", "assistant", "user"]
        assert history[1]["input"] == theirs["dialogue_history"][1]["input"]
        replies = [t for t in history[1:] if t["role"] == "user"]
        assert replies and all(t["content"] for t in replies)  # the server answered
        for mine, hf in zip(history, theirs["dialogue_history"]):
            if mine["role"] == "assistant" and hf["role"] == "assistant":
                same += mine["output"] == hf["output"]
    assert same >= SAME_REPLIES_AT_LEAST


def test_several_servers_give_the_one_server_dialogues(tmp_path, hosts, vllm_model, hf_rows):
    before = [_answered(url) for url in hosts]
    out = str(tmp_path / "two.jsonl")
    simulate(SimulateOptions(hostname=",".join(hosts), env_model=SERVED_NAME,
                             agent_model=vllm_model,
                             agent_backend="hf", output_path=out, device="cpu", **FLAGS))
    rows = _rows(out)
    assert [r["dialogue_history"] for r in rows] == [r["dialogue_history"] for r in hf_rows]
    answered = [_answered(url) - count for url, count in zip(hosts, before)]
    assert all(count > 0 for count in answered), answered  # each server took dialogues
    replies = sum(t["role"] == "user" for r in rows for t in r["dialogue_history"][1:])
    assert sum(answered) == replies  # one request per reply of the human
