"""A real `transformers serve` simulator on loopback drives real dialogues through simulate."""

import importlib.util
import time

import pytest

from sweet_rl.io import read_jsonl
from sweet_rl.models.openai_compat import ChatClient, EndpointUnavailable, ModelNotServed
from sweet_rl.records import Trajectory
from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from tests.serve_helpers import free_port, transformers_serve

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None,
    reason="needs transformers[serving] (fastapi, uvicorn)")]


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    with transformers_serve(tiny_model_dir) as base_url:
        yield base_url


def test_dialogues_with_the_served_simulator(server, tiny_model_dir, tmp_path):
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    out = tmp_path / "traj.jsonl"
    simulate(SimulateOptions(agent_model=tiny_model_dir, hostname="127.0.0.1", port=port,
                             env_model=tiny_model_dir, num_tasks=2, max_steps=3, max_new_tokens=8,
                             simulator_max_tokens=12, output_path=str(out), device="cpu"))
    rows = read_jsonl(str(out), Trajectory.from_dict)
    assert len(rows) == 2
    for traj in rows:
        assert "error" not in traj.extra
        roles = [t.role for t in traj.dialogue_history]
        assert roles[:3] == ["user", "assistant", "user"]
        replies = [t for t in traj.dialogue_history[1:] if t.role == "user"]
        assert replies and all(0 < len(t.content) <= 400 for t in replies)


@pytest.fixture
def skip_start_check(monkeypatch):
    # A wrong model name now fails at start (ModelNotServed, tested in
    # test_newcomer_mistakes.py). A request can still be rejected mid-run (the server was
    # restarted with another model); skipping the start check makes the real server reject
    # every request, which is what these tests need.
    monkeypatch.setattr(ChatClient, "check_reachable", lambda self, timeout=5.0: None)


def test_wrong_served_model_fails_at_start(server, tiny_model_dir, tmp_path):
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    out = tmp_path / "traj.jsonl"
    with pytest.raises(ModelNotServed, match="not-the-served-model.*it serves"):
        simulate(SimulateOptions(
            agent_model=tiny_model_dir, hostname="127.0.0.1", port=port,
            env_model="not-the-served-model", num_tasks=1, output_path=str(out), device="cpu"))
    assert not out.exists()


def test_rejected_requests_are_recorded_in_every_dialogue(server, tiny_model_dir, tmp_path,
                                                          capsys, skip_start_check):
    # As in the original, a rejected request makes the human say "No response." and the
    # dialogue goes on; each rejection is recorded in the row and counted in the metrics line.
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    out = tmp_path / "traj.jsonl"
    simulate(SimulateOptions(
        agent_model=tiny_model_dir, hostname="127.0.0.1", port=port,
        env_model="not-the-served-model", num_tasks=1, max_steps=3, max_new_tokens=8,
        output_path=str(out), device="cpu", max_error_share=1.0))
    [traj] = read_jsonl(str(out), Trajectory.from_dict)
    assert "error" not in traj.extra and len(traj.assistant_turns) == 3
    assert [t.content for t in traj.dialogue_history[2::2]] == ["No response."] * 2
    assert len(traj.extra["simulator_errors"]) == 2
    assert all(e.startswith("simulator: HTTP 400") for e in traj.extra["simulator_errors"])
    assert "dialogues with simulator errors 1" in capsys.readouterr().out


def test_stop_on_rejected_request_ends_the_dialogue_with_the_error(
    server, tiny_model_dir, tmp_path, skip_start_check
):
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    out = tmp_path / "traj.jsonl"
    simulate(SimulateOptions(
        agent_model=tiny_model_dir, hostname="127.0.0.1", port=port,
        env_model="not-the-served-model", num_tasks=1, max_steps=3, max_new_tokens=8,
        output_path=str(out), device="cpu", stop_on_rejected_request=True, max_error_share=1.0))
    [traj] = read_jsonl(str(out), Trajectory.from_dict)
    assert traj.extra["error"].startswith("simulator: HTTP 400")
    assert len(traj.assistant_turns) == 1 and traj.answer == "No answer"


def test_unreachable_simulator_fails_fast_naming_the_url(tiny_model_dir, tmp_path):
    port = free_port()
    out = tmp_path / "traj.jsonl"
    started = time.monotonic()
    with pytest.raises(EndpointUnavailable, match=f"127.0.0.1:{port}"):
        simulate(SimulateOptions(
            agent_model=tiny_model_dir, hostname="127.0.0.1", port=port, env_model=tiny_model_dir,
            num_tasks=1, output_path=str(out), device="cpu"))
    assert time.monotonic() - started < 60
    assert not out.exists()
