"""prepare_frontend_tasks on local WebSight-shaped files (read through ``datasets``, nothing
downloaded) and filter_websites with real headless Chromium."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from sweet_rl.rendering import assets as page_assets, page_checks
from sweet_rl.stages.filter_websites import FilterOptions, filter_websites
from sweet_rl.stages.prepare_frontend import PrepareFrontendOptions, prepare_frontend_tasks
from sweet_rl.rendering.result import RenderResult
from sweet_rl.records import RecordError
from sweet_rl.rendering.screenshots import screenshot_path
from tests.conftest import REPO_ROOT, SHARED_COLBENCH

ROWS = 25
RANGES = dict(train_start=0, train_end=10, test_start=10, test_end=20)
FIXED = "https://picsum.photos/id/48"
needs_datasets = pytest.mark.skipif(importlib.util.find_spec("datasets") is None,
                                    reason="the `datasets` library is not installed (html extra)")


def _html(i):
    return ('<html><link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/'
            f'tailwind.min.css" rel="stylesheet"><body><h1>Site {i} &amp; co</h1>'
            f'<img src="https://source.unsplash.com/random/{100 + i}x80/?shop">'
            f'<img src="https://picsum.photos/{50 + i}/60?random=2"></body></html>')


def _rows(n=ROWS, broken=None):
    texts = [None if i == broken else _html(i) for i in range(n)]
    return {"llm_generated_idea": [f"Idea {i}: a shop with a hero image." for i in range(n)],
            "text": texts}


def _write_parquet(path, columns):
    """A WebSight v0.2-shaped parquet file: an image column (PNG screenshots) plus the text."""
    import datasets
    png = page_assets.placeholder_png(16, 12)
    n = len(next(iter(columns.values())))
    features = {"image": datasets.Image()}
    features.update({name: datasets.Value("string") for name in columns})
    table = dict({"image": [{"bytes": png, "path": None}] * n}, **columns)
    datasets.Dataset.from_dict(table, features=datasets.Features(features)).to_parquet(str(path))
    return str(path)


@pytest.fixture()
def websight(tmp_path):
    return _write_parquet(tmp_path / "websight.parquet", _rows())


def _lines(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _expected(i):
    return {
        "problem_description": f"Idea {i}: a shop with a hero image.",
        "ground_truth": _html(i)
        .replace(f"https://source.unsplash.com/random/{100 + i}x80/?shop", f"{FIXED}/{100 + i}/80")
        .replace(f"https://picsum.photos/{50 + i}/60?random=2", f"{FIXED}/{50 + i}/60"),
    }


@needs_datasets
def test_prepare_splits_rows_in_order_and_rerun_adds_nothing(websight, tmp_path, capsys):
    out = tmp_path / "tasks"
    prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[websight],
                                                  **RANGES))
    train, test = _lines(out / "train.jsonl"), _lines(out / "test.jsonl")
    assert train == [_expected(i) for i in range(10)]
    assert test == [_expected(i) for i in range(10, 20)]
    assert all("unsplash" not in t["ground_truth"] for t in train + test)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("prepare_frontend_tasks: train 10 tasks (10 new), test 10 tasks "
                           "(10 new), 40 image URLs rewritten in new tasks, 20 rows read in ")
    for name in ("train", "test"):
        stage = json.loads((out / f"{name}.jsonl.config.json").read_text())["stages"]
        assert stage["prepare_frontend_tasks"]["data_files"] == [websight]
        assert stage["prepare_frontend_tasks"]["test_end"] == 20

    before = {n: (out / f"{n}.jsonl").read_bytes() for n in ("train", "test")}
    prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[websight],
                                                  **RANGES))
    assert "already complete" in capsys.readouterr().out
    assert {n: (out / f"{n}.jsonl").read_bytes() for n in ("train", "test")} == before

    # a larger test range appends only the new rows
    prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[websight],
                                                  **dict(RANGES, test_end=23)))
    assert _lines(out / "test.jsonl") == [_expected(i) for i in range(10, 23)]
    assert "test 13 tasks (3 new)" in capsys.readouterr().out


@needs_datasets
def test_interrupted_run_resumes_without_duplicates(tmp_path, capsys):
    # A run that stops at a bad row (14) keeps what it converted before it ...
    broken = _write_parquet(tmp_path / "broken.parquet", _rows(broken=14))
    out = tmp_path / "tasks"
    with pytest.raises(RecordError) as err:
        prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[broken],
                                                      chunk_size=3, **RANGES))
    assert str(err.value).startswith(f"{broken}: field 'text': expected a string in row 14")
    assert len(_lines(out / "train.jsonl")) == 10 and len(_lines(out / "test.jsonl")) == 4
    # ... and a torn last line, as a kill during a write leaves, is cut on the next run.
    with open(out / "train.jsonl", "r+", encoding="utf-8") as handle:
        keep = handle.readlines()[:6]
        handle.seek(0)
        handle.truncate()
        handle.writelines(keep)
        handle.write('{"problem_description": "Idea 6: a sh')
    good = _write_parquet(tmp_path / "good.parquet", _rows())
    prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[good],
                                                  chunk_size=3, **RANGES))
    assert _lines(out / "train.jsonl") == [_expected(i) for i in range(10)]
    assert _lines(out / "test.jsonl") == [_expected(i) for i in range(10, 20)]
    assert "train 10 tasks (4 new), test 10 tasks (6 new)" in capsys.readouterr().out


@needs_datasets
def test_resume_refuses_a_file_made_from_other_rows(websight, tmp_path):
    out = tmp_path / "tasks"
    prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[websight],
                                                  train_end=4, test_start=10,
                                                  test_end=12))
    before = (out / "train.jsonl").read_bytes()
    with pytest.raises(RecordError) as err:
        prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[websight],
                                                      train_start=1, train_end=6,
                                                      test_start=10, test_end=12))
    assert str(err.value).startswith(f"{out / 'train.jsonl'}, line 1: task differs from row 1")
    assert (out / "train.jsonl").read_bytes() == before
    prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[websight],
                                                  train_start=1, train_end=6,
                                                  test_start=10, test_end=12, overwrite=True))
    assert _lines(out / "train.jsonl") == [_expected(i) for i in range(1, 6)]


@needs_datasets
def test_jsonl_source_and_too_few_rows(tmp_path):
    src = tmp_path / "rows.jsonl"
    rows = _rows(6)
    src.write_text("".join(json.dumps({"llm_generated_idea": i, "text": t}) + "\n"
                           for i, t in zip(rows["llm_generated_idea"], rows["text"])))
    out = tmp_path / "tasks"
    with pytest.raises(ValueError, match="has only 6 rows but the ranges need 8"):
        prepare_frontend_tasks(PrepareFrontendOptions(output_dir=str(out), data_files=[str(src)],
                                                      train_end=4, test_start=4,
                                                      test_end=8))
    assert _lines(out / "train.jsonl") == [_expected(i) for i in range(4)]
    assert _lines(out / "test.jsonl") == [_expected(i) for i in range(4, 6)]


@needs_datasets
@pytest.mark.slow
def test_bad_source_via_cli_exits_nonzero_and_writes_nothing(tmp_path):
    no_idea = _write_parquet(tmp_path / "no_idea.parquet", {"text": [_html(i) for i in range(5)]})
    out = tmp_path / "tasks"
    script = os.path.join(REPO_ROOT, "scripts", "prepare_frontend_tasks.py")
    for extra, expected in (
            (["--data_files", no_idea], f"{no_idea}: field 'llm_generated_idea': missing column"),
            (["--data_files", str(tmp_path / "absent.parquet")], "absent.parquet: no such file"),
            (["--data_files", no_idea, "--train_end", "12", "--test_start", "10"],
             "train rows 0..12 and test rows 10..20000 overlap")):
        proc = subprocess.run([sys.executable, script, str(out), *extra], capture_output=True,
                              text=True, timeout=120, cwd=REPO_ROOT)
        assert proc.returncode == 2, proc.stderr
        assert expected in proc.stderr.strip().splitlines()[-1]
        assert not out.exists()


# ---------------------------------------------------------------- filter_websites


def _real_pages(n):
    path = SHARED_COLBENCH / "frontend_test.jsonl"
    if path.exists():
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for _, line in zip(range(n), handle)]
    return [{"problem_description": f"page {i}", "ground_truth": _html(i)} for i in range(n)]


@pytest.mark.slow
def test_filter_keeps_pages_that_render(render_assets, tmp_path, capsys):
    good = _real_pages(2)
    tasks = [good[0],
             {"problem_description": "endless script", "ground_truth":
              "<html><body><h1>never done</h1><script>while(true){}</script></body></html>"},
             good[1],
             {"problem_description": "blank", "ground_truth": "<html><body></body></html>",
              "hidden_information": "extra keys pass through"},
             dict(good[0], problem_description="same page, second task")]
    src, out, shots = tmp_path / "tasks.jsonl", tmp_path / "kept.jsonl", tmp_path / "shots"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    filter_websites(FilterOptions(input_path=str(src), output_path=str(out),
                                  screenshot_dir=str(shots), pool_size=2,
                                  page_load_timeout=3, script_timeout=2, assets_dir=render_assets))
    assert _lines(out) == [tasks[0], tasks[2], tasks[4]]
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("filter_websites: kept 3 of 5 tasks (dropped 1 failed, 1 blank; "
                           "4 distinct pages) with chrome ")
    names = sorted(os.listdir(shots))
    assert names == sorted({os.path.basename(screenshot_path(str(shots), t["ground_truth"],
                                                             "reference")) for t in good})
    for name in names:
        png = (shots / name).read_bytes()
        assert page_assets.png_size(png)[0] == 1280 and not page_checks.is_blank_png(png)
    stage = json.loads((tmp_path / "kept.jsonl.config.json").read_text())["stages"]
    assert stage["filter_websites"]["browser_version"].startswith("chrome ")

    with pytest.raises(FileExistsError):  # an existing output is kept unless --overwrite
        filter_websites(FilterOptions(input_path=str(src), output_path=str(out),
                                      assets_dir=render_assets))


def test_filter_bad_input_names_line_and_writes_nothing(tmp_path):
    src, out = tmp_path / "tasks.jsonl", tmp_path / "kept.jsonl"
    src.write_text(json.dumps({"problem_description": "p", "ground_truth": "<html></html>"})
                   + "\n" + json.dumps({"problem_description": "p"}) + "\n")
    with pytest.raises(RecordError, match=r"tasks.jsonl, line 2: field 'ground_truth': missing"):
        filter_websites(FilterOptions(input_path=str(src), output_path=str(out)))
    assert not out.exists()


def test_blank_and_drop_reason(monkeypatch):
    white = page_assets.encode_png(4, 3, [b"\xff" * 12] * 3)
    dot = page_assets.encode_png(4, 3, [b"\xff" * 12, b"\xff" * 6 + b"\0\0\0" + b"\xff" * 3,
                                        b"\xff" * 12])
    assert page_checks.is_blank_png(white) and not page_checks.is_blank_png(dot)
    with monkeypatch.context() as patch:  # without Pillow: the pure-Python decoder
        patch.setitem(sys.modules, "PIL", None)
        assert page_checks.is_blank_png(white) and not page_checks.is_blank_png(dot)
    keep = RenderResult(True, dot, 4, 3, "chrome 1")
    assert page_checks.drop_reason(keep) is None
    assert page_checks.drop_reason(RenderResult(True, white, 4, 3, "chrome 1")).startswith(
        "blank"
    )
    failed = RenderResult(False, None, 0, 0, "chrome 1", "TimeoutException: page load")
    assert page_checks.drop_reason(failed) == "failed: TimeoutException: page load"
