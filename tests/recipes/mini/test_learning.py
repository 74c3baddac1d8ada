"""The learning test: on the quick miniature (scripts/run_mini_quick.sh: one task
family, the short agent prompt), SWEET-RL trained through the real stages and files must
raise the warm agent's held-out success well above zero-shot, and the SWEET critic must pick
better actions than random choice among 8 samples per turn.

A sign error in pair construction, a swapped chosen/rejected, a ranking sorted the wrong way
or a mask shifted by a token would leave every other test green; each of them takes the gain
measured here away (a ranking sorted the wrong way, measured: SWEET-RL 9.1% against zero-shot
27.3%, the critic's Best-of-8 0.0% against random 33.3%). Fixed seeds; the margins are set
below the least gain measured over seeds and warm agents (docs/mini_reproduction.md, "The
quick miniature")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# the quick miniature's warm start, SWEET-RL and Best-of-8 (the suite's longest test)
pytestmark = pytest.mark.slow(about=950)

# success points (of 99 held-out dialogues) by which SWEET-RL must beat the zero-shot agent.
# Measured at commit 819855c (docs/mini_reproduction.md, "The quick miniature"): +26.2, +22.2,
# +27.3 over seeds 0-2 of the warm agent of warm-start seed 0, and +16.1, +30.3, +33.3 from the
# warm agents of warm-start seeds 1-3 (the one a machine trains depends on its float kernels).
# 10 is 6 points below the least of them and about two and a half standard deviations of
# the evaluation's noise (4 points on 99 dialogues) above no learning at all.
MIN_GAIN = 10
# success points (of 99 dialogues: 33 held-out tasks x 3) by which the SWEET critic's pick
# among 8 must beat a random pick among 8. Measured on the same four warm agents: +14.2
# (47.5 against 33.3), +46.5, +43.5, +58.6; a critic ranking the wrong way picks below random.
MIN_BEST_OF_8_GAIN = 5


def test_sweet_rl_beats_zero_shot_and_its_critic_beats_random_choice(tmp_path, repo_root):
    # the README's demo, its learning part (scripts/run_mini_quick.sh, seed 0, SWEET-RL only),
    # with the Best-of-8 point of the critic's curve
    # (3 dialogues per held-out task at N = 8: with one, a point has a standard deviation of
    # about 8). The warm start trains from try 1, one try at a time: on the 2-core Intel Xeon
    # machines that run CI, try 0 never learns the copy (0 of 30) and try 1 does (30 of 30),
    # so this trains one SFT instead of two side by side; where try 1 does not copy, try 2
    # trains after it. The kept agent is the one the default run keeps on those machines.
    env = dict(os.environ, OUT=str(tmp_path / "demo"), PART="mini", BON_NS="8", BON_ROLLOUTS="3",
               FIRST_TRY="1", TRIES_AT_ONCE="1", PYTHON=sys.executable, HF_HUB_OFFLINE="1")
    result = subprocess.run(["bash", "scripts/run_demo.sh"], cwd=repo_root, env=env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    out = tmp_path / "demo" / "mini"
    assert result.stdout.rstrip().endswith((out / "table.md").read_text().rstrip())

    methods = json.loads((out / "table.json").read_text())["methods"]
    zero, sweet = methods["zero_shot"]["0"], methods["sweet"]["0"]
    assert zero["dialogues"] == sweet["dialogues"] == 99  # 33 held-out tasks x 3
    assert sweet["success"] >= zero["success"] + MIN_GAIN, (zero, sweet)
    curve = json.loads((out / "seed0" / "best_of_n.json").read_text())["success"]
    assert curve["sweet critic"]["8"] >= curve["random"]["8"] + MIN_BEST_OF_8_GAIN, curve
