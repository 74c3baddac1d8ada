"""train_dpo.py under the real DeepSpeed launcher with ZeRO-3, on the CPU (as in CI).

Two processes, so ZeRO-3 really partitions the weights and optimizer states between ranks,
each rank scores its share of the reference log-probs (gathered to all), metrics are averaged
over ranks and saving gathers the shards. DeepSpeed's CPU accelerator is picked automatically
when there is no GPU; its process group uses gloo plus a shared-memory op that DeepSpeed
JIT-compiles once (needs a C++ compiler; cached under ~/.cache/torch_extensions): the
`shared_memory_op` fixture builds it in this process first, so the launched run's time limit
covers training only (the build took about 55 s on a fresh 2-core machine). The launcher passes
--local_rank to the script. About 30 s here once the op is built.

The second test trains the scalar regression head (--critic_head regression) the same way: the
head is a new layer DeepSpeed partitions when it starts, so the check is that save_model
gathers it with the backbone and that load_scalar_critic reads the result back.
"""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO_ROOT
from tests.training.helpers import critic_pairs, single_turn_pairs

pytestmark = pytest.mark.slow  # DeepSpeed's launcher with two processes

pytest.importorskip("deepspeed", reason="deepspeed is not installed (pip install deepspeed)")


def launcher():
    """The `deepspeed` command of this interpreter's environment (a `deepspeed` found first on
    PATH may belong to another Python, whose ranks would rebuild the shared-memory op)."""
    return [sys.executable, "-m", "deepspeed.launcher.runner"]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def weights(path):
    from safetensors.torch import load_file

    return {k: v.float() for k, v in load_file(os.path.join(path, "model.safetensors")).items()}


def can_build_cpu_ops():
    """DeepSpeed's CPU backend JIT-compiles its shared-memory comm op: it needs a C++ compiler
    and Python's headers (.ci/run installs both when missing)."""
    import sysconfig

    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    return bool(shutil.which(os.environ.get("CXX", "c++"))) and headers


@pytest.fixture(scope="module")
def shared_memory_op():
    """Build (or load from the cache) the CPU backend's shared-memory op before the launcher
    starts two ranks that would otherwise both wait on its build inside the timed run."""
    if torch.cuda.is_available():
        return None
    from deepspeed.accelerator import get_accelerator

    builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
    return builder.load() if builder is not None else None


def run_logged(command, log_path, timeout):
    """Run `command` with its output in `log_path`; on a timeout, fail showing the log's tail
    (where the run stalled) instead of a bare TimeoutExpired."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                   start_new_session=True)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
    with open(log_path) as log:
        output = log.read()
    assert process.returncode == 0, f"exit {process.returncode} after at most {timeout} s:\n" + (
        output[-6000:]
    )
    return output


needs_cpu_ops = pytest.mark.skipif(
    not torch.cuda.is_available() and not can_build_cpu_ops(),
    reason="DeepSpeed's CPU backend JIT-compiles its shared-memory comm op: "
           "install a C++ compiler and Python's headers (Debian: g++ python3-dev)")


@pytest.mark.slow(about=50)
@needs_cpu_ops
def test_zero3_on_cpu_matches_single_process_training(tiny_model_dir, tmp_path, shared_memory_op):
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    pairs = single_turn_pairs(tmp_path / "pairs.jsonl")
    flags = ["--pretrain", tiny_model_dir, "--dataset", pairs, "--learning_rate", "1e-3",
             "--max_epochs", "3", "--train_batch_size", "2", "--micro_train_batch_size", "1",
             "--max_len", "256", "--lr_warmup_ratio", "0", "--seed", "0"]
    ds_path = str(tmp_path / "zero3")
    # 2 processes x micro-batch 1 x accumulation 1 = the plain run's 1 x 1 x 2 per step
    command = launcher() + ["--num_gpus", "2", "--master_port", str(free_port()),
                            "scripts/train_dpo.py", *flags, "--save_path", ds_path,
                            "--zero_stage", "3", "--gradient_checkpointing"]
    # generous: a loaded 2-core CI machine once needed over 400 s
    output = run_logged(command, tmp_path / "launcher.log", timeout=900)
    assert "zero_stage=3" in output and "world_size=2" in output

    with open(os.path.join(ds_path, "metrics.jsonl")) as handle:
        metrics = [json.loads(line) for line in handle]
    assert len(metrics) == 6 and metrics[-1]["accuracy"] == 1.0

    # the same run without DeepSpeed, in this process
    plain_path = str(tmp_path / "plain")
    train_dpo(PreferenceOptions(
        pretrain=tiny_model_dir, dataset=pairs, save_path=plain_path, learning_rate=1e-3,
        max_epochs=3, train_batch_size=2, micro_train_batch_size=1, max_len=256,
        lr_warmup_ratio=0.0, seed=0))

    initial, zero3, plain = weights(tiny_model_dir), weights(ds_path), weights(plain_path)
    assert zero3.keys() == initial.keys()
    for name, tensor in initial.items():
        assert zero3[name].shape == tensor.shape, f"{name} saved as a shard: {zero3[name].shape}"
        assert not torch.equal(zero3[name], tensor), f"{name} did not change"
        assert torch.allclose(zero3[name], plain[name], atol=1e-4), (
            f"{name} differs from the plain run"
        )

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ds_path)
    assert model.generate(torch.tensor([[0, 2]]), max_new_tokens=3, do_sample=False).shape[1] > 2


@pytest.mark.slow(about=40)
@needs_cpu_ops
def test_zero3_regression_head_saves_gathered_and_loads(tiny_model_dir, tmp_path,
                                                        shared_memory_op):
    from safetensors import safe_open

    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.training.heads import load_scalar_critic

    pairs = critic_pairs(tmp_path / "pairs.jsonl")
    flags = ["--pretrain", tiny_model_dir, "--dataset", pairs, "--critic_head", "regression",
             "--learning_rate", "1e-3", "--max_epochs", "3", "--train_batch_size", "2",
             "--micro_train_batch_size", "1", "--max_len", "256", "--lr_warmup_ratio", "0",
             "--seed", "0"]
    ds_path = str(tmp_path / "zero3")
    command = launcher() + ["--num_gpus", "2", "--master_port", str(free_port()),
                            "scripts/train_dpo.py", *flags, "--save_path", ds_path,
                            "--zero_stage", "3", "--gradient_checkpointing"]
    output = run_logged(command, tmp_path / "launcher.log", timeout=900)
    assert "zero_stage=3" in output and "world_size=2" in output
    assert "critic_head=regression" in output

    with open(os.path.join(ds_path, "metrics.jsonl")) as handle:
        metrics = [json.loads(line) for line in handle]
    assert len(metrics) == 6 and metrics[-1]["accuracy"] == 1.0

    plain_path = str(tmp_path / "plain")
    train_dpo(PreferenceOptions(
        pretrain=tiny_model_dir, dataset=pairs, save_path=plain_path, critic_head="regression",
        learning_rate=1e-3, max_epochs=3, train_batch_size=2, micro_train_batch_size=1, max_len=256,
        lr_warmup_ratio=0.0, seed=0))

    # every tensor gathered whole (the head too), trained, and as the single-process run's
    zero3, plain = weights(ds_path), weights(plain_path)
    # the agent's checkpoint already names its backbone "model.*"; its lm_head is not loaded
    initial = {k: v for k, v in weights(tiny_model_dir).items() if not k.startswith("lm_head.")}
    assert zero3.keys() == plain.keys() == set(initial) | {"score_head.weight",
                                                           "score_head.bias"}
    with safe_open(os.path.join(ds_path, "model.safetensors"), framework="pt") as handle:
        assert handle.get_slice("score_head.weight").get_shape() == [1, 64]
    for name, tensor in zero3.items():
        assert tensor.shape == plain[name].shape, f"{name} saved as a shard: {tensor.shape}"
        if name in initial:
            assert not torch.equal(tensor, initial[name]), f"{name} did not change"
        assert torch.allclose(tensor, plain[name], atol=1e-4), f"{name} differs from plain"

    critic, reference = load_scalar_critic(ds_path, "cpu"), load_scalar_critic(plain_path, "cpu")
    with open(pairs) as handle:
        texts = [side for line in handle for side in json.loads(line).values()]
    assert critic.kind == "regression"
    assert critic.score(texts) == pytest.approx(reference.score(texts), abs=1e-3)
