"""The README's first command: scripts/run_demo.sh runs simulate -> evaluate -> view, then the
whole SWEET-RL loop on the CPU with tiny models, printing each stage's line."""

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow  # the demo's stages end to end, in subprocesses


@pytest.mark.slow(about=200)
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_demo_script_runs_every_stage(tmp_path):
    # parts 1 and 2 (the default's learning part is the learning test's run,
    # tests/test_mini_learning.py)
    env = dict(os.environ, OUT=str(tmp_path / "demo"), PART="1 2", MAX_NEW_TOKENS="8",
               ROLLOUTS="2", NUM_SAMPLES="2", SAMPLE_TOKENS="8",
               XDG_CACHE_HOME=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    result = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "run_demo.sh")], env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()

    def seen(prefix):
        return [line for line in lines if line.startswith(prefix)]

    # part 1: simulate -> evaluate -> view
    assert seen("simulate: 12 dialogues")
    assert seen("evaluate_code: 12 trajectories (6 tasks x 2)")
    assert seen("visualized 12 dialogues")
    for name in ("trajectories.jsonl", "critic_pairs.jsonl", "dialogues.html",
                 "trajectories.jsonl.config.json"):
        assert (tmp_path / "demo" / name).exists(), name
    # part 2: offline data -> pairs -> critic -> sample -> rank -> pair -> agent DPO -> evaluate
    assert seen("offline_demo: 18 scripted trajectories")
    [offline] = seen("evaluate_code: 18 trajectories (6 tasks x 3)")
    assert "success 100.0%" in offline and "6 preference pairs" in offline
    assert len(seen("train_dpo: stage=train_dpo")) == 2  # the critic, then the agent
    assert (
        seen("sample_best_of_n: ") and seen("rank_best_of_n: ") and seen("generate_random_pairs: ")
    )
    assert seen("simulate: 6 dialogues")
    assert seen("evaluate_code: 6 trajectories (6 tasks x 1)")
    sweet = tmp_path / "demo" / "sweet"
    for name in (
        "critic_pairs.jsonl",
        "sampled.jsonl",
        "ranked.jsonl",
        "agent_pairs.jsonl",
        "evaluation.jsonl",
        "checkpoints/critic/config.json",
        "checkpoints/agent/config.json",
    ):
        assert (sweet / name).exists(), name
    # The tiny model was built into the (redirected) user cache, not downloaded.
    assert (tmp_path / "cache" / "sweet_rl" / "tiny-llama-seed0" / "config.json").exists()


@pytest.mark.slow(about=110)
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_frontend_demo_runs_every_stage(tmp_path, render_assets):
    """PART=3: simulate -> evaluate_html -> view on the sample frontend tasks, then the whole
    SWEET-RL loop through scripts/run_sweet_frontend.sh, in Chromium, with random CLIP."""
    env = dict(os.environ, OUT=str(tmp_path / "demo"), PART="3", MAX_NEW_TOKENS="8",
               ROLLOUTS="2", NUM_SAMPLES="2", SAMPLE_TOKENS="8", HTML_STEPS="2",
               SWEET_RL_ASSETS=render_assets, HF_HUB_OFFLINE="1")
    result = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "run_demo.sh")], env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    lines = result.stdout.splitlines()

    def seen(prefix):
        return [line for line in lines if line.startswith(prefix)]

    assert seen("simulate: 6 dialogues") and seen("visualized 6 design dialogues")
    assert seen("evaluate_html: 6 trajectories (3 tasks x 2)")
    [offline] = seen("evaluate_html: 9 trajectories (3 tasks x 3)")
    # rollouts 0 and 2 show the reference page itself: exactly 1.0 whatever the CLIP weights
    assert "best-of-3 CLIP similarity 100.0" in offline and "6 preference pairs" in offline
    assert len(seen("train_dpo: stage=train_dpo")) == 2  # the critic, then the agent
    assert (
        seen("sample_best_of_n: ") and seen("rank_best_of_n: ") and seen("generate_random_pairs: ")
    )
    assert seen("simulate: 3 dialogues") and seen("evaluate_html: 3 trajectories (3 tasks x 1)")
    html = tmp_path / "demo" / "frontend"
    for name in ("trajectories.jsonl", "dialogues.html", "trajectories_screenshots",
                 "sweet/critic_pairs.jsonl", "sweet/agent_pairs.jsonl", "sweet/evaluation.jsonl",
                 "sweet/checkpoints/critic/config.json", "sweet/checkpoints/agent/config.json"):
        assert (html / name).exists(), name
    pngs = list((html / "trajectories_screenshots").glob("reference_*.png"))
    assert len(pngs) == 3  # one reference render per task, shared by the rollouts
