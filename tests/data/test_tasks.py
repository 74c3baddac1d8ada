"""Task loading: local files, the bundled samples, and the real hub-download code on a local
cache (HF_HUB_OFFLINE: nothing is fetched)."""

import json
import os

import pytest

from sweet_rl.data.tasks import load_tasks, parse_hub_path, resolve_input_path
from sweet_rl.records import RecordError


def test_bundled_samples_are_colbench_shaped():
    tasks = load_tasks(None)
    assert len(tasks) >= 5
    for task in tasks:
        assert "The signature of the function is: def " in task.problem_description
        assert len(task.test_cases) == 10 and task.ground_truth.startswith("def ")
        namespace = {}
        exec(task.ground_truth, namespace)  # our own reference code
        assert all(eval(expr, namespace) is not None for expr in task.test_cases.values())


def test_num_tasks_and_bad_rows(tmp_path):
    assert len(load_tasks(None, num_tasks=2)) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem_description": "p", "ground_truth": "g"}) + "\n"
                   + json.dumps({"ground_truth": "g"}) + "\n")
    with pytest.raises(
        RecordError, match=r"bad.jsonl, line 2: field 'problem_description': missing"
    ):
        load_tasks(str(bad))


def test_hub_path_goes_through_hf_hub_download(tmp_path, monkeypatch):
    assert parse_hub_path("hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl") == (
        "facebook/collaborative_agent_bench", "backend_tasks/test.jsonl")
    # Lay out a hub cache the way huggingface_hub does, then resolve offline through it.
    commit = "0" * 40
    repo = tmp_path / "datasets--facebook--collaborative_agent_bench"
    snapshot = repo / "snapshots" / commit / "backend_tasks"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    row = {"problem_description": "from the hub", "ground_truth": "def f(): return 1",
           "test_cases": {"test1": "f()"}}
    (snapshot / "test.jsonl").write_text(json.dumps(row) + "\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    path = resolve_input_path("hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl",
                              cache_dir=str(tmp_path))
    assert os.path.realpath(path) == os.path.realpath(snapshot / "test.jsonl")
    [task] = load_tasks("hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl",
                        cache_dir=str(tmp_path))
    assert task.problem_description == "from the hub"


def test_download_data_copies_the_first_rows(tmp_path, sample_tasks_path):
    from sweet_rl.stages.download import DownloadOptions, download_data
    from sweet_rl.io import read_jsonl

    out = tmp_path / "copy.jsonl"
    download_data(DownloadOptions(source=sample_tasks_path, destination=str(out), num_rows=2))
    assert read_jsonl(str(out)) == read_jsonl(sample_tasks_path)[:2]
    assert (tmp_path / "copy.jsonl.config.json").exists()
