"""The training scripts read and check their data before they import torch: a bad line stops a
run with its file, line and field in well under the seconds that importing torch and
transformers takes, and nothing is written to ``--save_path``."""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, RUN_SAYING_TORCH
from tests.training.helpers import write_jsonl


def _trajectory(reward):
    turns = [{"role": "user", "content": "write f"},
             {"role": "assistant", "content": "ok", "input": "prompt ", "output": "ok"}]
    row = {"task": {"problem_description": "p", "ground_truth": "def f(): pass"},
           "dialogue_history": turns}
    if reward is not None:
        row["reward"] = reward
    return row


CASES = {
    "dpo": ("train_dpo.py", [], [{"chosen": "a", "rejected": "b"}, {"chosen": "c"}],
            "line 2: field 'rejected': missing"),
    "regression_critic": ("train_dpo.py", ["--critic_head", "regression"],
                          [{"chosen": "a", "rejected": "b"}, {"chosen": "c", "rejected": 3}],
                          "line 2: field 'rejected'"),
    "sft": ("train_sft.py", [], [_trajectory(1.0), _trajectory(None)],
            "line 2: field 'reward': missing"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_line_stops_training_before_torch_is_imported(case, tiny_model_dir, tmp_path):
    script, flags, rows, said = CASES[case]
    data, save_path = write_jsonl(tmp_path / "data.jsonl", rows), tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", RUN_SAYING_TORCH, f"scripts/{script}", "--pretrain", tiny_model_dir,
         "--dataset", data, "--save_path", str(save_path), *flags],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"{data}, {said}" in result.stderr
    assert "torch imported: False" in result.stderr
    assert not save_path.exists()
