"""``simulate_interactions.py --task_type html`` end to end: the tiny agent and the tiny
vision-language simulator on real ColBench frontend tasks, pages rendered by a real Chromium;
a killed run resumed with --to_continue; and an agent that does show pages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.data.tasks import load_tasks
from sweet_rl.io import read_jsonl
from sweet_rl.records import Trajectory
from sweet_rl.rendering.screenshots import resolve, screenshot_path
from sweet_rl.models.tiny_vlm import build_tiny_vlm
from tests.conftest import SHARED_COLBENCH, colbench_file
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step, completion

FRONTEND = SHARED_COLBENCH / "frontend_test.jsonl"
FAST = ["--max_new_tokens", "8", "--simulator_max_tokens", "8", "--max_steps", "2",
        "--device", "cpu", "--render_workers", "2"]


@pytest.fixture(scope="module")
def assets(render_assets):
    colbench_file(FRONTEND.name)  # skips, naming the file, when it is missing
    return render_assets


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> str:
    return build_tiny_vlm(str(tmp_path_factory.mktemp("tiny-vlm")), seed=0)


@pytest.mark.slow
def test_killed_html_run_resumes_with_rows_screenshots_and_sidecar(
        assets, tiny_model_dir, tiny_vlm, tmp_path, repo_root):
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, str(repo_root / "scripts" / "simulate_interactions.py"),
           "--task_type", "html", "--agent_model", tiny_model_dir, "--env_model", tiny_vlm,
           "--input_path", str(FRONTEND), "--num_tasks", "2", "--best_of_n", "2",
           "--output_path", str(out), *FAST]
    env = dict(os.environ, SWEET_RL_ASSETS=assets)
    proc = subprocess.Popen(cmd + ["--batch_size", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 1:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # browsers included: they are in its session
    proc.wait()
    written = out.read_text().count("\n")
    assert 1 <= written < 4, "the run should have been killed part way"
    with open(out, "ab") as handle:  # a torn record, as a kill mid-write leaves
        handle.write(b'{"task": {"problem_desc')

    result = subprocess.run(cmd + ["--batch_size", "4", "--to_continue"], capture_output=True,
                            text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "simulate: 4 dialogues" in result.stdout and "answered with a page" in result.stdout

    rows = read_jsonl(str(out), Trajectory.from_dict)
    tasks = load_tasks(str(FRONTEND), 2)
    assert [r.task.problem_description for r in rows] == [
        tasks[i % 2].problem_description for i in range(4)]  # row i + j*num_tasks, once each
    folder = tmp_path / "run_screenshots"
    for row in rows:
        reference = resolve(row.extra["reference_screenshot"], str(out))
        assert reference == screenshot_path(str(folder), row.task.ground_truth, "reference")
        with open(reference, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
        assert 1 <= len(row.assistant_turns) <= 2 and "error" not in row.extra
        for turn in row.assistant_turns:
            assert {"html", "screenshot"} <= set(turn.extra)
            assert turn.input.startswith("<|begin_of_text|>")
        assert all(len(t.content) <= 1000 for t in row.dialogue_history[2::2])
    # One reference file per task, whichever run rendered it; no half-written files.
    references = sorted(p for p in os.listdir(folder) if p.startswith("reference_"))
    assert len(references) == 2 and not [p for p in os.listdir(folder) if p.startswith(".tmp")]
    sidecar = json.loads((tmp_path / "run.jsonl.config.json").read_text())["stages"]["simulate"]
    assert sidecar["task_type"] == "html" and sidecar["to_continue"] is True
    assert sidecar["browser_version"].startswith("chrome ")
    assert sidecar["screenshot_dir"] == str(folder)


@pytest.mark.slow
def test_pages_the_agent_shows_reach_the_vlm_and_become_the_answer(
        assets, tiny_vlm, tmp_path, monkeypatch):
    """The agent is an OpenAI-compatible endpoint that always shows a page (the tiny model
    writes no HTML); the simulator is the real tiny VLM in-process."""
    page = ('<html><link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/'
            'tailwind.min.css" rel="stylesheet"><body class="bg-blue-600 h-64"></body></html>')
    monkeypatch.setenv("SWEET_RL_ASSETS", assets)
    out = tmp_path / "shown.jsonl"
    with FakeOpenAIServer([Step(200, body=completion(f"OUTPUT: How is this? {page}"))]) as server:
        simulate(SimulateOptions(agent_backend="openai", agent_model="fake",
                                 agent_base_url=server.base_url,
                                 env_model=tiny_vlm, task_type="html", input_path=str(FRONTEND),
                                 num_tasks=2, max_steps=2, simulator_max_tokens=6, device="cpu",
                                 render_workers=2, output_path=str(out)))
    rows = read_jsonl(str(out), Trajectory.from_dict)
    assert len(rows) == 2
    shot = screenshot_path(str(tmp_path / "shown_screenshots"), page)
    for row in rows:
        assert row.answer == page and resolve(row.extra["answer_screenshot"], str(out)) == shot
        turns = row.assistant_turns
        # the agent's later prompts hold its pages, as the original's did
        assert len(turns) == 2 and all(t.content == f" How is this? {page}" for t in turns)
        assert page in turns[1].input
        assert row.dialogue_history[2].role == "user"  # the VLM answered between the turns
    assert os.path.isfile(shot)

    hidden = tmp_path / "hidden.jsonl"
    with FakeOpenAIServer([Step(200, body=completion(f"OUTPUT: How is this? {page}"))]) as server:
        simulate(SimulateOptions(agent_backend="openai", agent_model="fake",
                                 agent_base_url=server.base_url,
                                 env_model=tiny_vlm, task_type="html", input_path=str(FRONTEND),
                                 num_tasks=1, max_steps=2, simulator_max_tokens=6, device="cpu",
                                 render_workers=1, output_path=str(hidden), page_placeholder=True))
    [row] = read_jsonl(str(hidden), Trajectory.from_dict)
    assert [t.content for t in row.assistant_turns] == [" How is this? [SEE RENDERED HTML]"] * 2
    assert page not in row.assistant_turns[1].input and row.answer == page
