"""train_dpo.py under DeepSpeed ZeRO-3 on a GPU with the tiny models; prints the throughput
of the agent's DPO and of the regression and vision-language critics (bf16).

Skipped where there is no CUDA GPU (CI, the CPU development machine).
"""

import json
import os
import re
import subprocess

import pytest
import torch

from tests.conftest import REPO_ROOT
from tests.training.helpers import QUESTIONS, critic_pairs, dialogue, write_jsonl
from tests.training.test_deepspeed import free_port, launcher, weights

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
pytest.importorskip("deepspeed", reason="deepspeed is not installed (pip install deepspeed)")


def test_zero3_bf16_on_gpu_reports_throughput(tiny_model_dir, tmp_path, capsys):
    rows = [{"chosen": dialogue(q * (1 + i % 4), "I WANT TO ANSWER: def f" * (1 + i % 3)),
             "rejected": dialogue(q * (1 + i % 4), "I don't know.")}
            for i, q in enumerate(QUESTIONS * 11)]  # 66 pairs of varied length
    pairs = write_jsonl(tmp_path / "pairs.jsonl", rows)
    save_path = str(tmp_path / "gpu")
    command = launcher() + [
        "--num_gpus",
        "1",
        "--master_port",
        str(free_port()),
        "scripts/train_dpo.py",
        "--pretrain",
        tiny_model_dir,
        "--dataset",
        pairs,
        "--save_path",
        save_path,
        "--learning_rate",
        "1e-3",
        "--max_epochs",
        "2",
        "--train_batch_size",
        "4",
        "--micro_train_batch_size",
        "2",
        "--max_len",
        "512",
        "--zero_stage",
        "3",
        "--bf16",
        "--gradient_checkpointing",
        "--flash_attn",
        "--mean_log_prob",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=500,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = next(line for line in result.stdout.splitlines() if line.startswith("train_dpo:"))
    assert "zero_stage=3" in summary
    with capsys.disabled():
        speed = dict(
            re.findall(r"(samples_per_second|tokens_per_second|train_seconds)=(\S+)", summary)
        )
        print(
            f"\nGPU ZeRO-3 bf16 tiny-model DPO throughput: {speed} "
            f"({torch.cuda.get_device_name(0)})"
        )
    with open(os.path.join(save_path, "metrics.jsonl")) as handle:
        metrics = [json.loads(line) for line in handle]
    assert metrics[-1]["accuracy"] >= 0.75  # an easy preference, learnt within two epochs
    saved, initial = weights(save_path), weights(tiny_model_dir)
    assert all(saved[k].shape == v.shape for k, v in initial.items())


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory):
    from sweet_rl.models.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(str(tmp_path_factory.mktemp("tiny-qwen2-vl")), seed=0)


@pytest.mark.parametrize("head", ["regression", "vlm_regression"])
def test_zero3_bf16_critic_heads_on_gpu_report_throughput(head, tiny_model_dir, tmp_path,
                                                          capsys, request):
    if head == "vlm_regression":
        from tests.training.vlm_helpers import vlm_pairs

        model, pairs = request.getfixturevalue("tiny_vlm_dir"), vlm_pairs(tmp_path / "data")
    else:
        model, pairs = tiny_model_dir, critic_pairs(tmp_path / "pairs.jsonl")
    save_path = str(tmp_path / head)
    command = launcher() + [
        "--num_gpus", "1", "--master_port", str(free_port()), "scripts/train_dpo.py",
        "--pretrain", model, "--dataset", pairs, "--critic_head", head,
        "--save_path", save_path, "--learning_rate", "1e-3", "--max_epochs", "2",
        "--train_batch_size", "2", "--micro_train_batch_size", "1", "--max_len", "256",
        "--lr_warmup_ratio", "0", "--eval_holdout", "0", "--zero_stage", "3", "--bf16",
        "--gradient_checkpointing",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=500,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = next(line for line in result.stdout.splitlines() if line.startswith("train_dpo:"))
    assert "zero_stage=3" in summary and f"critic_head={head}" in summary
    with capsys.disabled():
        speed = dict(re.findall(r"(samples_per_second|tokens_per_second)=(\S+)", summary))
        print(f"\nGPU ZeRO-3 bf16 {head} critic throughput: {speed} "
              f"({torch.cuda.get_device_name(0)})")
    with open(os.path.join(save_path, "metrics.jsonl")) as handle:
        metrics = [json.loads(line) for line in handle]
    assert metrics and all(m["loss"] == m["loss"] for m in metrics)  # trained, no NaN loss
    assert "score_head.weight" in weights(save_path)
