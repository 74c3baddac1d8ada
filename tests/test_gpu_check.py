"""The GPU check (benchmarks/gpu_check.sh): its CPU dry run goes through every step with tiny
sizes, and its runner keeps going past a failed or stalled step and names it at the end.

The check itself runs on a GPU machine (docs/benchmarks.md, "GPU"); here the dry run keeps
its steps correct between such runs: the same commands, the same stages, the same parsing of
their figures, on the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import gpu_check  # noqa: E402
from gpu_runner import Context, Step, StepFailed, run_plan  # noqa: E402

# DeepSpeed's CPU comm op, built (or loaded from the cache) before the dry run's ZeRO-3 steps
from tests.training.test_deepspeed import shared_memory_op  # noqa: E402,F401

STEPS = ("env", "install", "project", "inputs", "sample", "rank", "train_agent_plain",
         "train_critic_plain", "train_agent_zero3", "train_critic_zero3", "gpu_tests", "mini")


def _records(out):
    with open(os.path.join(out, "results.jsonl")) as handle:
        return {r["step"]: r for r in map(json.loads, handle)}


def _python(code):
    return [sys.executable, "-c", code]


def test_a_failed_step_is_named_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "left_running"

    def stall(ctx):  # a stage that hangs, with a child of its own in the background
        ctx.run(["bash", "-c", f"(sleep 30; touch {marker}) & sleep 30"])

    def fails(ctx):
        ctx.run(_python("import sys; print('bad input on line 3'); sys.exit(3)"))

    plan = [Step("first", lambda ctx: {"value": ctx.run(_python("print(41 + 1)")).split()[-1]},
                 30),
            Step("broken", fails, 30),
            Step("needs_broken", lambda ctx: {}, 30, needs=("broken",)),
            [Step("stalled", stall, 1), Step("beside", lambda ctx: {"ok": True}, 30)],
            Step("last", lambda ctx: {"ok": True}, 30)]
    monkeypatch.setattr(gpu_check, "PLAN", plan)
    monkeypatch.setattr(gpu_check, "_capped", lambda step, mode: step)
    start = time.time()
    code = gpu_check.main(["--dry_run", "--out", str(tmp_path / "out")])
    assert code == 1 and time.time() - start < 20
    said = capsys.readouterr().out
    assert "gpu_check: FAILED: broken, needs_broken, stalled" in said
    records = _records(tmp_path / "out")
    assert records["first"]["status"] == "passed" and records["first"]["figures"] == {
        "value": "42"}
    assert records["broken"]["status"] == "failed"
    assert "exited 3" in records["broken"]["error"] and "bad input on line 3" in (
        records["broken"]["error"])
    assert records["needs_broken"]["status"] == "skipped"
    assert records["stalled"]["status"] == "timeout"
    assert records["beside"]["status"] == records["last"]["status"] == "passed"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["not_passed"] == ["broken", "needs_broken", "stalled"]
    assert "| broken | failed |" in (tmp_path / "out" / "table.md").read_text()
    time.sleep(1)
    assert not marker.exists()  # the stalled step's whole process group was stopped
    log = (tmp_path / "out" / "logs" / "broken.log").read_text()  # the command, then its output
    assert log.startswith("$ ") and log.endswith("\nbad input on line 3\n")


def test_a_gpu_run_packs_the_logs_into_one_archive(tmp_path, monkeypatch):
    import tarfile

    def with_mini_logs(ctx):  # as the miniature's step leaves them
        os.makedirs(os.path.join(ctx.out, "mini_logs"))
        with open(os.path.join(ctx.out, "mini_logs", "warm.log"), "w") as handle:
            handle.write("trained\n")
        return {}

    plan = [Step("first", lambda ctx: {"said": ctx.run(_python("print('hello')")).split()[-1]},
                 30), Step("mini", with_mini_logs, 30)]
    monkeypatch.setattr(gpu_check, "PLAN", plan)
    monkeypatch.setattr(gpu_check, "_capped", lambda step, mode: step)
    out = tmp_path / "out"
    assert gpu_check.main(["--out", str(out), "--commit", "abc1234"]) == 0
    assert sorted(os.listdir(out)) == ["logs.tgz", "results.jsonl", "summary.json", "table.md"]
    with tarfile.open(out / "logs.tgz") as archive:
        names = set(archive.getnames())
        assert {"logs/first.log", "mini_logs/warm.log"} <= names
        assert b"hello" in archive.extractfile("logs/first.log").read()
    assert json.loads((out / "summary.json").read_text())["mode"] == "gpu"


def test_a_step_is_not_started_without_time_left(tmp_path):
    ctx = Context(out=str(tmp_path), work=str(tmp_path), deadline=time.time() + 5)
    records = run_plan([Step("late", lambda ctx: {}, 30)], ctx)
    assert records[0]["status"] == "skipped" and "out of time" in records[0]["error"]


def test_step_failed_carries_its_message(tmp_path):
    def check(ctx):
        raise StepFailed("trained with zero_stage=0")

    ctx = Context(out=str(tmp_path), work=str(tmp_path), deadline=time.time() + 100)
    assert run_plan([Step("s", check, 30)], ctx)[0]["error"] == "trained with zero_stage=0"


# the GPU check's CPU dry run: every step, the miniature included (minutes)
@pytest.mark.slow(about=120)
@pytest.mark.usefixtures("shared_memory_op")
def test_dry_run_goes_through_every_step_on_the_cpu(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry_run", "--out", str(out)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "gpu_check: every step passed" in result.stdout
    records = _records(out)
    assert set(records) == set(STEPS)
    assert all(r["status"] == "passed" for r in records.values()), records
    figures = {name: r["figures"] for name, r in records.items()}
    assert figures["inputs"]["agent_pairs"] == 8 < 2 * figures["inputs"]["critic_pairs"]
    assert figures["train_agent_plain"]["examples"] == 8  # only the first pairs are kept

    install = figures["install"]  # DeepSpeed importable, torch untouched
    assert install["deepspeed"] and install["torch"] == figures["env"]["torch"]
    assert figures["project"]["sweet_rl"] == str(REPO_ROOT / "sweet_rl" / "__init__.py")
    for name in STEPS[6:10]:
        train = figures[name]
        assert train["zero_stage"] == (3 if name.endswith("zero3") else 0), name
        assert train["tokens_per_second"] > 0 and train["peak_rss_mib"] > 0, name
    sample, rank = figures["sample"], figures["rank"]
    assert sample["candidates"] == 8 * sample["turns"] >= 16
    # every candidate has at most max_new_tokens tokens (16 in the dry run), its stop included
    assert 0 < sample["generated_tokens"] <= sample["candidates"] * 16
    assert rank["candidates"] == 8 * rank["turns"] and rank["candidates_per_second"] > 0
    tests = figures["gpu_tests"]["tests"]  # no GPU here: the GPU tests skip, saying why
    assert tests and all(s == "skipped" for n, s in tests.items() if "test_gpu" in n)
    assert "needs a CUDA GPU" in figures["gpu_tests"]["skip_reasons"]
    assert set(figures["mini"]["success"]) == {"zero_shot", "sweet"}
    table = (out / "mini_table.md").read_text()
    assert "| SWEET-RL |" in table and table in result.stdout
    assert "| train_critic_zero3 | passed |" in (out / "table.md").read_text()
