"""The offline demo's command (moved from sweet_rl.data.offline_demo to the cli package)."""

import json

from sweet_rl.cli.offline_demo import OfflineDemoOptions, offline_demo
from sweet_rl.io import read_jsonl
from sweet_rl.records import Trajectory


def test_offline_demo_writes_the_scripted_rows(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "offline.jsonl"
    offline_demo(OfflineDemoOptions(output_path=str(out), tokenizer=tiny_model_dir, rollouts=2))
    rows = read_jsonl(str(out), Trajectory.from_dict)
    tasks = len(rows) // 2
    assert len(rows) == 2 * tasks and tasks > 0
    # row i + j * num_tasks is rollout j of task i; rollout 1 answers wrong
    assert rows[0].task.problem_description == rows[tasks].task.problem_description
    assert rows[0].task.ground_truth.strip() in rows[0].answer
    assert rows[tasks].answer.endswith("):\n    return None\n```")
    assert json.loads((tmp_path / "offline.jsonl.config.json").read_text())  # the sidecar
    assert f"offline_demo: {len(rows)} scripted trajectories" in capsys.readouterr().out
