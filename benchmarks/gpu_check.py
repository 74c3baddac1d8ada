#!/usr/bin/env python
"""The GPU check: proves the GPU path and measures it in one run of at most 8 minutes.

    bash benchmarks/gpu_check.sh                      # on a GPU machine; figures in $OUT
    bash benchmarks/gpu_check.sh --dry_run --out DIR  # the same steps on the CPU, tiny sizes

Steps, in order (docs/benchmarks.md, "GPU", says what each measures):
  env        the machine: Python, torch, CUDA, the GPU;
  install, project   a virtual environment on top of the machine's packages (its torch
             untouched), DeepSpeed and the rest from the wheel folder (benchmarks/gpu_wheels.sh
             fills it; pip --no-index); the project itself with --no-deps
             (benchmarks/gpu_install.py);
  inputs     a ~1B random Llama and the miniature's data (benchmarks/gpu_inputs.py);
  sample, rank    the hf agent's 8 candidates per turn (tokens/s) and the critic's ranking
             with the prompt cache (candidates/s) (benchmarks/gpu_throughput.py);
  train_{agent,critic}_{plain,zero3}   agent DPO and the critic's training, bf16, without
             DeepSpeed and under ZeRO-3 (its launcher, one GPU): tokens/s and peak memory;
  gpu_tests and mini, side by side: the tests that skip without CUDA, and the quick
             miniature's recipe for one seed with DEVICE=cuda stages at the dry run's sizes
             (its time and its table; the full quick miniature does not fit the budget).
Each step has a time cap within the budget; a failed step is recorded and the others still
run unless they need it. Written to OUT: results.jsonl (one line per step, as it ends),
summary.json, table.md, gpu_tests.xml, the miniature's table, and the steps' logs (logs/ and
mini_logs/; on a GPU run packed into logs.tgz, since the device tool brings back at most 8
files). Exits 1 naming the steps that did not pass. --dry_run runs every step on the CPU
(tiny model, tiny miniature from the inputs' offline dialogues); its install step builds the
same environment, and needs no wheel folder where the running Python already has DeepSpeed
and fire.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from gpu_install import install, project  # noqa: E402
from gpu_runner import (Context, Step, StepFailed, last_json, run_plan,  # noqa: E402
                        table)

WHEELS = os.path.join(REPO, "benchmarks", "gpu_wheels")
GPU_TESTS = ["tests/training/test_gpu.py", "tests/agents/test_vllm_agent.py"]  # skip w/o CUDA
MINI_TINY = dict(TRAIN_TASKS="12", EPOCHS="1", DRILLS="8", DRILL_EPOCHS="0", COPY_MIN="0",
                 TEST_TASKS="1", K="3", NUM_SAMPLES="2", DATA_FRACTION="0.25", SAMPLE_SHARDS="1",
                 MAX_NEW_TOKENS="24", TRAJ_EPOCHS="1", EVAL_ROLLOUTS="1", BON_NS="2")
MODES = {
    # sized from the step times of a run on one H200 (docs/benchmarks.md, "GPU"): the steps
    # before the last two take about 310 s, the GPU tests about 130 s beside the miniature
    "gpu": dict(device="cuda", size="1b", tasks=24, agent_pairs=48, micro=2, bf16="True",
                sample_seconds=10, max_new_tokens=192, rank_seconds=5, budget=480,
                caps=dict(env=40, install=150, inputs=120, sample=75, rank=60, train=110,
                          gpu_tests=300, mini=420),
                mini=dict(SEEDS="0", METHODS="sweet", DEVICE="cuda", **MINI_TINY)),
    "dry_run": dict(device="cpu", size="tiny", tasks=4, agent_pairs=8, micro=2, bf16="False",
                    sample_seconds=2, max_new_tokens=16, rank_seconds=2, budget=1500,
                    caps=dict(env=60, install=180, inputs=120, sample=90, rank=90, train=300,
                              gpu_tests=150, mini=600),
                    mini=dict(SEEDS="0", METHODS="sweet", DEVICE="cpu", **MINI_TINY)),
}


def environment(ctx) -> dict:
    probe = ("import json, os, platform, sys, torch, transformers\nc = torch.cuda.is_available()\n"
             "p = torch.cuda.get_device_properties(0) if c else None\n"
             "print(json.dumps({'python': platform.python_version(), 'torch': torch.__version__,"
             " 'torch_cuda': torch.version.cuda, 'transformers': transformers.__version__,"
             " 'cuda': c, 'gpu': p.name if c else None,"
             " 'gpu_memory_gib': round(p.total_memory / 2**30, 1) if c else None,"
             " 'bf16': c and torch.cuda.is_bf16_supported(), 'cpus': os.cpu_count(),"
             " 'in_venv': sys.prefix != sys.base_prefix}))")
    facts = last_json(ctx.run([ctx.facts["python"], "-c", probe]))
    if shutil.which("nvidia-smi"):
        facts["nvidia_smi"] = ctx.run(["nvidia-smi", "-L"], check=False).strip()[:300]
    ctx.facts.update(torch=facts["torch"], in_venv=facts["in_venv"])
    if ctx.facts["mode"]["device"] == "cuda" and not facts["cuda"]:
        raise StepFailed(f"torch {facts['torch']} sees no CUDA GPU")
    return facts


def inputs(ctx) -> dict:
    mode, folder = ctx.facts["mode"], os.path.join(ctx.work, "inputs")
    facts = last_json(ctx.run([ctx.facts["python"], "benchmarks/gpu_inputs.py", folder,
                               "--size", mode["size"], "--device", mode["device"],
                               "--tasks", str(mode["tasks"]),
                               "--agent_pairs", str(mode["agent_pairs"])]))
    ctx.facts["inputs"] = folder
    return facts


def throughput(step: str):
    def run(ctx) -> dict:
        mode, folder = ctx.facts["mode"], ctx.facts["inputs"]
        command = [ctx.facts["python"], "benchmarks/gpu_throughput.py", step,
                   os.path.join(folder, "model")]
        if step == "sample":
            command += [os.path.join(folder, "offline.jsonl"),
                        "--max_new_tokens", str(mode["max_new_tokens"])]
        command += [os.path.join(folder, "sampled.jsonl"), "--device", mode["device"],
                    "--seconds", str(mode[f"{step}_seconds"])]
        return last_json(ctx.run(command))
    return run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def train(kind: str, zero3: bool):
    """One train_dpo.py run on the 1B model in bf16: the paper's config for ``kind``, one
    epoch; under ZeRO-3 through DeepSpeed's launcher with one process (NCCL on a GPU)."""
    def run(ctx) -> dict:
        mode, folder = ctx.facts["mode"], ctx.facts["inputs"]
        save = os.path.join(ctx.work, f"train_{kind}")
        config = "agent_dpo_backend" if kind == "agent" else "critic_backend"
        flags = ["--config", f"configs/{config}.json", "--pretrain",
                 os.path.join(folder, "model"), "--dataset",
                 os.path.join(folder, f"{kind}_pairs.jsonl"), "--save_path", save,
                 "--zero_stage", "3" if zero3 else "0", "--bf16", mode["bf16"],
                 "--gradient_checkpointing", "True", "--flash_attn", "False",
                 "--max_len", "2048", "--train_batch_size", "8",
                 "--micro_train_batch_size", str(mode["micro"]), "--max_epochs", "1",
                 "--learning_rate", "1e-6", "--lr_warmup_ratio", "0", "--eval_holdout", "0",
                 "--report_to", "none", "--seed", "0"]
        script = [ctx.facts["python"], "scripts/train_dpo.py"]
        if zero3:
            script = [ctx.facts["python"], "-m", "deepspeed.launcher.runner", "--num_gpus", "1",
                      "--master_port", str(free_port()), "scripts/train_dpo.py"]
        try:
            output = ctx.run(script + flags)
        finally:
            shutil.rmtree(save, ignore_errors=True)  # gigabytes of weights
        found = re.findall(r"^train_dpo: (.*)$", output, re.M)
        if not found:
            raise StepFailed("no train_dpo: summary line in the output")
        summary = dict(item.split("=", 1) for item in found[-1].split() if "=" in item)
        if summary.get("zero_stage") != ("3" if zero3 else "0"):
            raise StepFailed(f"trained with zero_stage={summary.get('zero_stage')}")
        keep = ("examples", "steps", "tokens_per_second", "samples_per_second", "train_seconds",
                "total_seconds", "final_loss", "zero_stage", "peak_gpu_allocated_mib",
                "peak_gpu_reserved_mib", "peak_rss_mib")
        return {k: _number(summary[k]) for k in keep if k in summary}
    return run


def _number(text: str):
    try:
        return float(text) if "." in text or "e" in text else int(text)
    except ValueError:
        return text


def gpu_tests(ctx) -> dict:
    report = os.path.join(ctx.out, "gpu_tests.xml")
    # (-o addopts=: one process, without the project's two workers: the machine has no xdist)
    output = ctx.run([ctx.facts["python"], "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                      "-o", "addopts=", f"--junitxml={report}", *GPU_TESTS], check=False)
    if not os.path.exists(report):
        raise StepFailed("pytest wrote no report: " + " | ".join(output.splitlines()[-3:]))
    cases = {}
    for case in ElementTree.parse(report).iter("testcase"):
        outcome = next((child for child in case if child.tag in ("failure", "error",
                                                                 "skipped")), None)
        cases[f"{case.get('classname')}::{case.get('name')}"] = (
            "passed" if outcome is None else outcome.tag, (outcome.get("message") or "")[:200]
            if outcome is not None else "")
    figures = {"tests": {name: status for name, (status, _) in cases.items()},
               "skip_reasons": sorted({m for s, m in cases.values() if s == "skipped"}),
               "throughput": re.findall(r"^(GPU ZeRO-3 bf16 .*)$", output, re.M)}
    bad = [name for name, (status, _) in cases.items() if status in ("failure", "error")]
    if ctx.facts["mode"]["device"] == "cuda":  # on a GPU, test_gpu.py must really run
        bad += [name for name, (status, _) in cases.items()
                if status == "skipped" and "test_gpu" in name]
    if bad or not cases:
        raise StepFailed(f"did not pass: {', '.join(bad) or 'no test collected'}")
    return figures


def mini(ctx) -> dict:
    mode, out = ctx.facts["mode"], os.path.join(ctx.work, "mini")
    env = dict(mode["mini"], OUT=out, PYTHON=ctx.facts["python"],
               JOBS=str(max(2, (os.cpu_count() or 2) - 2)))  # beside the GPU tests
    # at these sizes the warm agent learns nothing: the inputs' scripted offline dialogues
    env["OFFLINE_FROM"] = os.path.join(ctx.facts["inputs"], "offline.jsonl")
    try:
        ctx.run(["bash", "scripts/run_mini_quick.sh"], env=env)
    finally:  # its table and its stages' logs come back, whatever happened
        for name in ("table.md", "table.json"):
            if os.path.exists(os.path.join(out, name)):
                shutil.copy(os.path.join(out, name), os.path.join(ctx.out, f"mini_{name}"))
        if os.path.isdir(os.path.join(out, "logs")):
            shutil.copytree(os.path.join(out, "logs"), os.path.join(ctx.out, "mini_logs"),
                            dirs_exist_ok=True)
    with open(os.path.join(out, "table.json")) as handle:
        found = json.load(handle)
    return {"settings": mode["mini"], "seconds": found["seconds"],
            "success": {m: {s: v["success"] for s, v in seeds.items()}
                        for m, seeds in found["methods"].items()}}


def describe(record: dict) -> str:
    f = record["figures"]
    if "tokens_per_second" in f and "examples" in f:
        memory = (f"peak GPU {f['peak_gpu_allocated_mib']:.0f} MiB allocated, "
                  f"{f['peak_gpu_reserved_mib']:.0f} reserved" if "peak_gpu_allocated_mib" in f
                  else f"peak RSS {f['peak_rss_mib']:.0f} MiB")
        return (f"{f['tokens_per_second']} tokens/s, {f['samples_per_second']} pairs/s, "
                f"{memory}; {f['steps']} steps, {f['train_seconds']} s of {f['total_seconds']}")
    if record["step"] == "sample":
        return (f"{f['tokens_per_second']} tokens/s ({f['turns']} turns x "
                f"{f['candidates'] // f['turns']}, prompts of {f['mean_prompt_tokens']} tokens)")
    if record["step"] == "rank":
        return f"{f['candidates_per_second']} candidates/s ({f['turns']} turns)"
    if record["step"] == "gpu_tests":
        counts = {}
        for status in f["tests"].values():
            counts[status] = counts.get(status, 0) + 1
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + "; " + "; ".join(
            f["throughput"] + f["skip_reasons"])
    if record["step"] == "mini":
        return f"whole run {f['seconds']} s; success % {json.dumps(f['success'])}"
    return ", ".join(f"{k} {v}" for k, v in f.items() if not isinstance(v, (dict, list)))


# Only what a step reads makes it need another: a step that lacks a package fails on its own
PLAN = [Step("env", environment, 0),
        Step("install", install, 0),
        Step("project", project, 0),
        Step("inputs", inputs, 0, reserve=150),
        Step("sample", throughput("sample"), 0, needs=("inputs",), reserve=150),
        Step("rank", throughput("rank"), 0, needs=("sample",), reserve=150)] + [
    Step(f"train_{kind}_{way}", train(kind, way == "zero3"), 0, needs=("inputs",), reserve=150)
    for way in ("plain", "zero3") for kind in ("agent", "critic")] + [
    [Step("gpu_tests", gpu_tests, 0),
     Step("mini", mini, 0, needs=("inputs",))]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry_run", action="store_true", help="the CPU dry run, tiny sizes")
    parser.add_argument("--out", default=os.environ.get("OUT") or "outputs/gpu_check")
    parser.add_argument("--wheels", default=WHEELS, help="the wheel folder (gpu_wheels.sh)")
    parser.add_argument("--budget", type=float, help="seconds for the whole check")
    parser.add_argument("--steps", help="only these steps (comma-separated)")
    parser.add_argument("--commit", help="the commit the tree is at (default: git's answer)")
    args = parser.parse_args(argv)
    mode = MODES["dry_run" if args.dry_run else "gpu"]
    started = time.time()
    os.makedirs(args.out, exist_ok=True)
    for stale in ("results.jsonl", "summary.json", "table.md", "mini_table.md"):
        if os.path.exists(os.path.join(args.out, stale)):
            os.remove(os.path.join(args.out, stale))
    work = tempfile.mkdtemp(prefix="sweet_rl_gpu_check.")
    env = {"PYTHONPATH": REPO, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    if args.dry_run:  # one torch thread per process: on a small, busy CPU two run slower
        env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    else:  # one process: NCCL needs no network, its bootstrap stays on the loopback device
        env["NCCL_SOCKET_IFNAME"] = os.environ.get("NCCL_SOCKET_IFNAME", "lo")
    ctx = Context(out=os.path.abspath(args.out), work=work, cwd=REPO,
                  deadline=started + (args.budget or mode["budget"]), env=env,
                  facts={"python": sys.executable, "mode": mode,
                         "wheels": os.path.abspath(args.wheels)})
    plan = [[_capped(s, mode) for s in item] if isinstance(item, list) else _capped(item, mode)
            for item in PLAN]
    if args.steps:
        wanted = args.steps.split(",")
        plan = [[s for s in item if s.name in wanted] if isinstance(item, list) else item
                for item in plan if isinstance(item, list) or item.name in wanted]
    try:
        records = run_plan(plan, ctx)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = [r["step"] for r in records if r["status"] != "passed"]
    summary = {"mode": "dry_run" if args.dry_run else "gpu", "commit": args.commit or _commit(),
               "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "seconds": round(time.time() -
                                                                               started, 1),
               "not_passed": failed}
    with open(os.path.join(ctx.out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    text = table(records, describe) + f"\n\n{json.dumps(summary)}\n"
    with open(os.path.join(ctx.out, "table.md"), "w") as handle:
        handle.write(text)
    print("\n" + text)
    if os.path.exists(os.path.join(ctx.out, "mini_table.md")):
        print(open(os.path.join(ctx.out, "mini_table.md")).read())
    if not args.dry_run:
        _bundle_logs(ctx.out)
    print(f"gpu_check: {'FAILED: ' + ', '.join(failed) if failed else 'every step passed'} "
          f"({summary['seconds']} s; {ctx.out})")
    return 1 if failed else 0


def _bundle_logs(out: str) -> None:
    """logs/ and mini_logs/ into one logs.tgz: the device tool brings back 8 files at most."""
    import tarfile

    folders = [name for name in ("logs", "mini_logs") if os.path.isdir(os.path.join(out, name))]
    with tarfile.open(os.path.join(out, "logs.tgz"), "w:gz") as archive:
        for name in folders:
            archive.add(os.path.join(out, name), arcname=name)
    for name in folders:
        shutil.rmtree(os.path.join(out, name))


def _capped(step: Step, mode: dict) -> Step:
    caps = mode["caps"]
    return dataclasses.replace(
        step, cap=caps.get(step.name, caps["train"] if step.name.startswith("train_") else 90))


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
