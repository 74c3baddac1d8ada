"""The README's first command: scripts/run_demo.sh runs simulate -> evaluate -> view."""

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_demo_script_runs_every_stage(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path / "demo"), MAX_NEW_TOKENS="8", ROLLOUTS="2",
               XDG_CACHE_HOME=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    result = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "run_demo.sh")], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("simulate: 12 dialogues") for line in lines)
    assert any(line.startswith("evaluate_code: 12 trajectories (6 tasks x 2)") for line in lines)
    assert any(line.startswith("visualized 12 dialogues") for line in lines)
    for name in ("trajectories.jsonl", "critic_pairs.jsonl", "dialogues.html",
                 "trajectories.jsonl.config.json"):
        assert (tmp_path / "demo" / name).exists(), name
    # The tiny model was built into the (redirected) user cache, not downloaded.
    assert (tmp_path / "cache" / "sweet_rl" / "tiny-llama-seed0" / "config.json").exists()
