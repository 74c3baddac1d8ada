"""evaluate_html end to end: real ColBench reference pages rendered by a real headless Chromium,
scored by a real open_clip ViT-B-32 with random weights (seeded; nothing is downloaded).

The run file follows the simulate contract: three tasks, two rollouts, row ``i + j*3`` is
rollout j of task i (6 rows, not a multiple of 100). Answers are the task's own page, another
task's page, or nothing.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, colbench_file

pytest.importorskip("open_clip")
pytest.importorskip("selenium")

from sweet_rl.stages.evaluate_html import EvaluateHtmlOptions, evaluate_html  # noqa: E402
from sweet_rl.evaluation.preferences import GROUND_TRUTH_PREFIX  # noqa: E402
from sweet_rl.records import RecordError  # noqa: E402

CLIP = dict(clip_pretrained="none", seed=0, device="cpu", batch_size=8, pool_size=2)
SETTINGS = "ViT-B-32|none(seed=0)|center"


@pytest.fixture(scope="module")
def tasks():
    with open(colbench_file("frontend_test.jsonl")) as handle:
        return [json.loads(next(handle)) for _ in range(3)]


def row(task, answer, tag, **extra):
    """A trajectory as simulate --task_type html writes it; ``tag`` makes its texts unique."""
    turn = {
        "role": "assistant",
        "content": "My page: [SEE RENDERED HTML]",
        "input": f"<prompt {tag}>",
        "output": f"<output {tag}>",
        "html": answer or None,
        "screenshot": None,
    }
    data = {
        "task": task,
        "dialogue_history": [{"role": "user", "content": task["problem_description"]}, turn],
        "answer": answer,
        "answer_screenshot": None,
        "reference_screenshot": None,
    }
    data.update(extra)
    return data


def write(path, rows):
    with open(path, "w") as handle:
        for data in rows:
            handle.write(json.dumps(data) + "\n")
    return str(path)


def read(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def run_a(tasks, render_assets, tmp_path_factory):
    """Evaluate the main run once; the tests below read what it wrote."""
    folder = tmp_path_factory.mktemp("run_a")
    t0, t1, t2 = tasks
    rows = [row(t0, t0["ground_truth"], "a0"),  # rollout 0: task 0's own page
            row(t1, t2["ground_truth"], "a1"),  #            task 1 answered with task 2's page
            row(t2, "", "a2"),  #                            task 2: no page shown
            row(t0, "", "b0"),  # rollout 1
            row(t1, t1["ground_truth"], "b1"),
            row(t2, t0["ground_truth"], "b2")]
    path = write(folder / "run.jsonl", rows)
    metrics = evaluate_html(EvaluateHtmlOptions(
        saved_path=path, k=2, preference_path=str(folder / "pairs.jsonl"),
        ground_truth_preference_path=str(folder / "gt_pairs.jsonl"), assets_dir=render_assets,
        **CLIP))
    return {"path": path, "folder": folder, "metrics": metrics, "rows": read(path), "tasks": tasks}


@pytest.mark.slow
def test_rewards_screenshots_and_metrics(run_a):
    rows, metrics = run_a["rows"], run_a["metrics"]
    rewards = [r["reward"] for r in rows]
    assert rewards[0] == 1.0 and rewards[4] == 1.0  # the reference page itself
    assert all(-1.0 <= r <= 1.0 for r in rewards)
    assert rewards[1] < 1.0 and rewards[5] < 1.0  # another task's page
    assert rewards[2] < 0.9 and rewards[3] < 0.9  # nothing shown: black, far from any page
    assert all(r["clip_settings"] == SETTINGS and "render_error" not in r for r in rows)
    # row 4 answers with its reference's page: one render drew both files
    page, ref = (os.path.join(run_a["folder"], rows[4][key])
                 for key in ("answer_screenshot", "reference_screenshot"))
    assert page != ref and open(page, "rb").read() == open(ref, "rb").read()
    shots = os.path.join(run_a["folder"], "run_screenshots")
    for r in rows:
        ref = os.path.join(run_a["folder"], r["reference_screenshot"])
        assert ref.startswith(shots) and os.path.isfile(ref)  # stored relative to the file
        assert (r["answer_screenshot"] is None) == (r["answer"] == "")
    # Three references and three distinct answer pages, each rendered once.
    assert metrics["rendered"] == 6 and metrics["render_failed"] == 0 and metrics["evaluated"] == 6
    assert metrics["browser"].startswith("chrome ")
    best = [max(rewards[i], rewards[i + 3]) for i in range(3)]
    assert metrics["similarity"] == pytest.approx(100 * sum(best) / 3)
    sidecar = json.loads(open(run_a["path"] + ".config.json").read())["stages"]["evaluate_html"]
    assert sidecar["clip_settings"] == SETTINGS and sidecar["browser_version"] == metrics["browser"]
    assert sidecar["crop"] == "center" and sidecar["clip_model"] == "ViT-B-32"


@pytest.mark.slow
def test_pairs_follow_the_threshold_rule(run_a):
    rows, folder = run_a["rows"], run_a["folder"]
    tags = ["a0", "a1", "a2", "b0", "b1", "b2"]
    text = [f"<prompt {tag}><output {tag}>" for tag in tags]
    expected = []  # (chosen row, rejected row): rollouts of a task at least 0.1 apart
    for a, b in ((0, 3), (1, 4), (2, 5)):
        if abs(rows[a]["reward"] - rows[b]["reward"]) >= 0.1:
            expected.append((a, b) if rows[a]["reward"] > rows[b]["reward"] else (b, a))
    # Task 0 (own page vs nothing) and task 2 (a page vs nothing) clear the threshold.
    assert (0, 3) in expected and (5, 2) in expected
    assert read(folder / "pairs.jsonl") == [
        {"chosen": text[c], "rejected": text[r]} for c, r in expected
    ]
    prefix = [GROUND_TRUTH_PREFIX.format(ground_truth=r["task"]["ground_truth"]) for r in rows]
    assert read(folder / "gt_pairs.jsonl") == [
        {"chosen": prefix[c] + text[c], "rejected": prefix[c] + text[r]} for c, r in expected]
    assert prefix[0].startswith("In light that the final answer is: <") and prefix[0].endswith(
        "</html>."
    )
    assert run_a["metrics"]["pairs"] == len(expected)
    assert os.path.isfile(folder / "gt_pairs.jsonl.config.json")


@pytest.mark.slow
def test_second_run_is_idempotent_and_renders_nothing(run_a):
    path = run_a["path"]
    before = open(path, "rb").read()
    shots = os.path.join(run_a["folder"], "run_screenshots")
    stamps = {name: os.stat(os.path.join(shots, name)).st_mtime_ns for name in os.listdir(shots)}
    metrics = evaluate_html(EvaluateHtmlOptions(saved_path=path, k=2, **CLIP))
    assert metrics["evaluated"] == 0 and metrics["rendered"] == 0
    assert metrics["similarity"] == pytest.approx(run_a["metrics"]["similarity"])
    assert metrics["browser"] == run_a["metrics"]["browser"]  # kept from the run that rendered
    assert open(path, "rb").read() == before
    assert {
        name: os.stat(os.path.join(shots, name)).st_mtime_ns for name in os.listdir(shots)
    } == stamps
    # --reevaluate scores again from the stored screenshots: no render, the same rewards.
    again = evaluate_html(EvaluateHtmlOptions(saved_path=path, k=2, reevaluate=True, **CLIP))
    assert again["evaluated"] == 6 and again["rendered"] == 0
    assert [r["reward"] for r in read(path)] == pytest.approx(
        [r["reward"] for r in run_a["rows"]], abs=1e-5
    )


@pytest.mark.slow
def test_win_rate_against_another_run(run_a, capsys):
    """Run B answers every task with its reference page: best-of-1 = 1.0 everywhere.
    Run A's best-of-2: task 0 = 1.0 (tie), task 1 = 1.0 (tie), task 2 < 1.0 (loss)
    -> A wins (0.5 + 0.5 + 0) / 3 = 1/3 of the tasks and B 2/3."""
    t0, t1, t2 = run_a["tasks"]
    folder = run_a["folder"]
    path_b = write(
        folder / "run_b.jsonl",
        [row(t, t["ground_truth"], f"r{i}") for i, t in enumerate((t0, t1, t2))],
    )
    shots = os.path.join(folder, "run_screenshots")  # A rendered every page B needs
    metrics_b = evaluate_html(EvaluateHtmlOptions(saved_path=path_b, k=1, screenshot_dir=shots,
                                                  **CLIP))
    assert metrics_b["rendered"] == 0 and metrics_b["similarity"] == pytest.approx(100.0)
    capsys.readouterr()
    ours = evaluate_html(EvaluateHtmlOptions(saved_path=run_a["path"], k=2, reference_path=path_b,
                                             **CLIP))
    assert ours["win_rate"] == pytest.approx(100 / 3)
    assert f"win rate 33.3% vs {path_b}" in capsys.readouterr().out
    theirs = evaluate_html(EvaluateHtmlOptions(saved_path=path_b, k=1,
                                               reference_path=run_a["path"], **CLIP))
    assert theirs["win_rate"] == pytest.approx(200 / 3)
    # Other tasks, or tasks in another order, are refused with the file and line.
    swapped = write(folder / "swapped.jsonl", [read(path_b)[i] for i in (1, 0, 2)])
    with pytest.raises(
        RecordError, match=r"swapped\.jsonl, line 1: field 'task\.problem_description'"
    ):
        evaluate_html(EvaluateHtmlOptions(saved_path=run_a["path"], k=2, reference_path=swapped,
                                          **CLIP))
    unscored = write(folder / "unscored.jsonl", [row(t, "", "u") for t in (t0, t1, t2)])
    with pytest.raises(RecordError, match=r"unscored\.jsonl, line 1: field 'reward'"):
        evaluate_html(EvaluateHtmlOptions(saved_path=run_a["path"], k=2, reference_path=unscored,
                                          **CLIP))


@pytest.mark.slow
def test_original_layout_answer_is_a_screenshot_path(run_a, tmp_path):
    """The original code stored the final screenshot's path as ``answer`` (or null) and had no
    screenshot keys; such files still load and score without rendering the answer."""
    t0, t1, _ = run_a["tasks"]
    source = run_a["rows"][0]
    own_page = os.path.join(run_a["folder"], source["answer_screenshot"])
    old = [
        {"task": t0, "dialogue_history": source["dialogue_history"], "answer": own_page},
        {
            "task": t1,
            "dialogue_history": source["dialogue_history"],
            "answer": str(tmp_path / "gone.png"),
        },
        {"task": t0, "dialogue_history": source["dialogue_history"], "answer": None},
        {"task": t0, "dialogue_history": source["dialogue_history"], "answer": "damaged.png"},
    ]
    (tmp_path / "damaged.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a picture")
    path = write(tmp_path / "old.jsonl", old)
    metrics = evaluate_html(EvaluateHtmlOptions(
        saved_path=path, k=1, screenshot_dir=os.path.join(run_a["folder"],
                                                          "run_screenshots"), **CLIP
                                                ))
    assert metrics["rendered"] == 0
    rows = read(path)
    assert rows[0]["reward"] == 1.0 and "answer_screenshot" not in rows[0]
    assert "gone.png not found" in rows[1]["render_error"] and rows[1]["reward"] < 0.9
    assert rows[2]["reward"] == pytest.approx(
        run_a["rows"][3]["reward"], abs=1e-5
    )  # black vs task 0
    assert "render_error" not in rows[2]  # no page shown is not an error
    # A relative path is read against the file's folder; a file PIL cannot read counts as missing.
    assert "unreadable screenshot" in rows[3]["render_error"]
    assert rows[3]["reward"] == pytest.approx(rows[2]["reward"], abs=1e-6)


@pytest.mark.slow
def test_failed_render_is_scored_black_with_the_error(tasks, render_assets, tmp_path):
    """A browser that cannot start (Firefox without geckodriver) fails every page; both pages
    are then black, so the pair scores 1.0, and the row says why."""
    if shutil.which("geckodriver") is not None:
        pytest.skip("geckodriver is installed: Firefox would render")
    path = write(tmp_path / "run.jsonl", [row(tasks[0], tasks[0]["ground_truth"], "x")])
    metrics = evaluate_html(EvaluateHtmlOptions(saved_path=path, browser="firefox",
                                                assets_dir=render_assets, **CLIP))
    (data,) = read(path)
    assert metrics["render_failed"] == 2 and metrics["rendered"] == 0
    assert data["reward"] == 1.0 and data["answer_screenshot"] is None
    assert data["render_error"].startswith("answer: render failed: browser did not start")
    assert "reference: render failed" in data["render_error"]


@pytest.mark.slow
def test_bad_input_names_file_line_and_field_and_leaves_the_file(run_a, tmp_path):
    good = read(run_a["path"])
    cases = {
        "no_truth": (
            {**good[1], "task": {"problem_description": good[1]["task"]["problem_description"]}},
            r"line 2: field 'task\.ground_truth': missing",
        ),
        "not_a_trajectory": ({"chosen": "a", "rejected": "b"}, r"line 2: field 'task': missing"),
        "backend": (
            {**good[1], "task": {**good[1]["task"], "test_cases": {"test1": "f(1)"}}},
            r"line 2: field 'task\.test_cases'",
        ),
    }
    for name, (bad_row, pattern) in cases.items():
        path = write(tmp_path / f"{name}.jsonl", [good[0], bad_row] + good[2:])
        before = open(path, "rb").read()
        with pytest.raises(RecordError, match=rf"{name}\.jsonl, {pattern}"):
            evaluate_html(EvaluateHtmlOptions(saved_path=path, k=2, **CLIP))
        assert open(path, "rb").read() == before
        assert not os.path.exists(path + ".config.json")
    path = write(tmp_path / "five.jsonl", good[:5])
    with pytest.raises(RecordError, match="not a multiple of --k 2"):
        evaluate_html(EvaluateHtmlOptions(saved_path=path, k=2, **CLIP))


@pytest.mark.slow
def test_script_runs_by_subprocess(run_a, tmp_path):
    script = str(REPO_ROOT / "scripts" / "evaluate_html.py")
    t0, t1, t2 = run_a["tasks"]
    path = write(
        tmp_path / "sub.jsonl",
        [row(t, t["ground_truth"], f"s{i}") for i, t in enumerate((t0, t1, t2))],
    )
    shots = os.path.join(run_a["folder"], "run_screenshots")
    result = subprocess.run(
        [
            sys.executable,
            script,
            path,
            "--clip_pretrained",
            "none",
            "--device",
            "cpu",
            "--screenshot_dir",
            shots,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "evaluate_html: 3 trajectories (3 tasks x 1), best-of-1 CLIP similarity 100.0"
        in result.stdout
    )
    assert [r["reward"] for r in read(path)] == [1.0, 1.0, 1.0]
    bad = write(
        tmp_path / "bad.jsonl",
        [{"task": {"problem_description": "x"}, "dialogue_history": [], "answer": ""}],
    )
    result = subprocess.run(
        [sys.executable, script, bad], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert f"error: {bad}, line 1: field 'task.ground_truth': missing" in result.stderr


def _picture(path, colour, box=None, size=(320, 240)):
    """A screenshot stand-in drawn with Pillow (the format follows the file's suffix)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, colour)
    if box:
        ImageDraw.Draw(image).rectangle(box, fill="navy")
    image.save(path)
    return str(path)


def test_original_rows_no_answer_and_image_answers_without_a_browser(tmp_path, capsys):
    """The three answer forms, scored from pictures on disk (reference screenshots given, so
    nothing is rendered and no browser is needed):

    - ``"No answer"`` (the agent never showed a page): black 224x224, as the original scored
      it -- no render_error, since no page is not an error;
    - a path to an existing .png / .jpg (relative to the file's folder, or absolute): that file;
    - a path to a missing picture: black, with the reason in render_error.
    Row 0 answers with a copy of its reference, so it scores exactly 1.0; rows 2 and 5 are
    scored black against the same reference, so they score alike.
    """
    shots = tmp_path / "shots"
    shots.mkdir()
    _picture(shots / "reference.png", "white", (40, 30, 280, 90))
    _picture(tmp_path / "same.png", "white", (40, 30, 280, 90))  # identical pixels
    _picture(tmp_path / "other.jpg", "orange", (10, 150, 120, 230))
    other_png = _picture(shots / "other.png", "lightgreen")
    task = {
        "problem_description": "A landing page",
        "ground_truth": "<html><body>ref</body></html>",
    }
    history = [{"role": "user", "content": task["problem_description"]},
               {"role": "assistant", "content": "<html><body>x</body></html>", "input": "<p>",
                "output": "OUTPUT: <html><body>x</body></html>"}]
    answers = ["same.png",  # relative: read against the trajectory file's folder
               "other.jpg",
               "No answer",
               other_png,  # absolute
               "gone.jpg",  # missing: black, with the reason
               "shots/missing.png"]
    rows = [{"task": task, "dialogue_history": history, "answer": answer,
             "reference_screenshot": "shots/reference.png"} for answer in answers]
    path = write(tmp_path / "run.jsonl", rows)
    metrics = evaluate_html(EvaluateHtmlOptions(saved_path=path, k=1,
                                                preference_path=str(tmp_path / "pairs.jsonl"),
                                                threshold=0.0, **CLIP))
    out = read(path)
    rewards = [r["reward"] for r in out]
    assert metrics["rendered"] == 0 and metrics["render_failed"] == 0 and metrics["evaluated"] == 6
    assert rewards[0] == 1.0
    assert rewards[2] == pytest.approx(rewards[4], abs=1e-6) == pytest.approx(rewards[5], abs=1e-6)
    assert len({round(r, 6) for r in rewards[:4]}) == 4  # four different pictures
    assert (
        "render_error" not in out[0]
        and "render_error" not in out[2]
        and "render_error" not in out[3]
    )
    assert out[4]["render_error"] == "answer: answer screenshot gone.jpg not found"
    assert out[5]["render_error"] == "answer: answer screenshot shots/missing.png not found"
    assert all("answer_screenshot" not in r for r in out)  # the answers keep their own paths
    assert [r["answer"] for r in out] == answers
    # ours, then the original's three lines: the mean over all rows as a bare number, the
    # best-of-k mean (k=1: the same mean), the number of pairs written
    lines = capsys.readouterr().out.strip().splitlines()
    mean = sum(rewards) / 6
    assert lines[-4].startswith("evaluate_html: 6 trajectories (6 tasks x 1)")
    assert lines[-3] == str(metrics["mean_reward"]) and metrics["mean_reward"] == pytest.approx(
        mean
    )
    assert lines[-2] == f"Best-of-1 Average reward: {sum(rewards) / 6}"
    assert lines[-1] == "Number of preference pairs: 0"  # k=1: one rollout per task, no pairs


def test_temp_path_is_the_screenshot_folder_and_train_is_accepted(tmp_path, capsys, caplog):
    """The original's ``evaluate_html.py SAVED K TEMP_PATH``: pages it renders go to TEMP_PATH
    (here nothing needs rendering: the answer is "No answer" and the reference screenshot is
    there, found by its content name in TEMP_PATH). ``--train`` only gets a notice."""
    from sweet_rl.rendering.screenshots import screenshot_path

    task = {"problem_description": "p", "ground_truth": "<html><body>ref</body></html>"}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _picture(
        screenshot_path(str(scratch), task["ground_truth"], "reference"), "white", (5, 5, 50, 50)
    )
    path = write(
        tmp_path / "run.jsonl", [{"task": task, "dialogue_history": [], "answer": "No answer"}]
    )
    with caplog.at_level("WARNING"):
        metrics = evaluate_html(EvaluateHtmlOptions(saved_path=path, k=1, temp_path=str(scratch),
                                                    train=True, **CLIP))
    assert metrics["rendered"] == 0
    (data,) = read(path)
    assert data["reference_screenshot"] == os.path.join("scratch", os.path.basename(
        screenshot_path(str(scratch), task["ground_truth"], "reference")))
    notices = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("--temp_path (the original's screenshot folder)") for m in notices)
    assert any(m.startswith("--train has no effect") for m in notices)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("Best-of-1 Average reward: ")
