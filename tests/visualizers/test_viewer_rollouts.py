"""The backend viewer says which task and rollout each dialogue is and which tests failed;
each viewer refuses the other half's files."""

import json
import os
import subprocess
import sys

import pytest

from sweet_rl.records import Trajectory
from visualizers.page_parts import WrongViewer, file_kind
from visualizers.visualize_design_dialogue_histories import DesignViewerOptions, visualize_design
from visualizers.visualize_dialogue_histories import ViewerOptions, render_dialogues_html, visualize

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKEND_VIEWER = "visualizers/visualize_dialogue_histories.py"
DESIGN_VIEWER = "visualizers/visualize_design_dialogue_histories.py"
TESTS = {"t1": "f(1)", "t2": "f(2)", "t3": "f(0)"}
RESULTS = [
    {"test": "f(1)", "passed": True, "expected": "2", "got": "2"},
    {"test": "f(2)", "passed": False, "expected": "4", "got": "[2, '<two>']"},
    {"test": "f(0)", "passed": False, "expected": "0", "got": "error: ZeroDivisionError"},
]


def _row(problem, reward=None, **extra):
    row = {"task": {"problem_description": problem, "ground_truth": "def f(x):\n    return 2 * x",
                    "test_cases": TESTS},
           "dialogue_history": [{"role": "user", "content": problem},
                                {"role": "user", "content": "x doubled"},
                                {"role": "assistant", "content": "def f(x): ...",
                                 "input": "PROMPT", "output": "def f(x): ..."}],
           "answer": "def f(x): ..."}
    if reward is not None:
        row["reward"] = reward
    row.update(extra)
    return row


# two tasks, two rollouts each: row i + j * 2 is rollout j of task i
ROWS = [_row("Double a number.", 1.0), _row("Halve a number.", 0.0),
        _row("Double a number.", 1 / 3, test_results=RESULTS,
             grader_tests=["pass", "fail", "error:ZeroDivisionError"], leak_turns=[1]),
        _row("Halve a number.")]


def _write(folder, rows, name="run.jsonl", stages=None):
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if stages is not None:
        (folder / (name + ".config.json")).write_text(json.dumps({"stages": stages}))
    return path


def _section(text, index):
    return text.split(f'id="dialogue-{index}"', 1)[1].split("</section>", 1)[0]


def test_each_dialogue_names_its_task_and_rollout_and_its_failed_tests(tmp_path, capsys):
    src = _write(tmp_path, ROWS, stages={"evaluate_code": {"k": 2}, "simulate": {"best_of_n": 2}})
    page = tmp_path / "run.html"
    visualize(ViewerOptions(input_path=str(src), output_path=str(page)))
    text = page.read_text(encoding="utf-8")
    places = [_section(text, i).split('<span class="place"', 1)[1].split("</span>", 1)[0]
              for i in range(4)]
    assert [p.split(">", 1)[1] for p in places] == [
        "task 1, rollout 1 of 2", "task 2, rollout 1 of 2", "task 1, rollout 2 of 2",
        "task 2, rollout 2 of 2"]
    assert 'title="row 2 = task index 0 + rollout index 1 x 2 tasks (0-based)"' in places[2]
    assert ('<span id="rollouts">2 rollouts per task, 2 tasks (evaluate_code --k in the '
            "sidecar)</span>") in text
    third = _section(text, 2)
    assert '<h3 class="tests">Tests: 1 of 3 passed</h3>' in third
    table = third.split('<table class="failed-tests">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 3  # the header and the two failed tests; the passed one not
    assert ("<tr><td>2</td><td><pre>f(2)</pre></td><td><pre>4</pre></td>"
            "<td><pre>[2, &#x27;&lt;two&gt;&#x27;]</pre></td><td>fail</td></tr>") in table
    assert ("<tr><td>3</td><td><pre>f(0)</pre></td><td><pre>0</pre></td>"
            "<td><pre>error: ZeroDivisionError</pre></td>"
            "<td>error:ZeroDivisionError</td></tr>") in table
    assert "failed-tests" not in _section(text, 0) + _section(text, 3)  # no test_results kept
    # the leak highlighting of the same viewer still works beside the new parts
    assert third.count('class="turn user leak"') == 1
    assert "visualized 4 dialogues" in capsys.readouterr().out


def test_every_test_passed_shows_the_count_only():
    row = _row("Double a number.", 1.0, test_results=[dict(RESULTS[0])] * 2)
    text = render_dialogues_html([row], "all passed")
    assert '<h3 class="tests">Tests: 2 of 2 passed</h3>' in text and "<table" not in text


def test_without_a_sidecar_every_row_is_its_own_task(tmp_path):
    src = _write(tmp_path, ROWS)
    page = tmp_path / "run.html"
    visualize(ViewerOptions(input_path=str(src), output_path=str(page), max_dialogues=3))
    text = page.read_text(encoding="utf-8")
    assert f'<span id="rollouts">1 rollout per task assumed: no sidecar {src}.config.json' in text
    assert ">task 3, rollout 1 of 1</span>" in _section(text, 2)


def test_the_largest_sidecar_k_that_fits_the_file_is_used(tmp_path):
    # evaluate_code ran with its default k=1; simulate made two rollouts: 2 fits, so 2
    src = _write(tmp_path, ROWS, stages={"evaluate_code": {"k": 1}, "simulate": {"best_of_n": 2}})
    visualize(ViewerOptions(input_path=str(src), output_path=str(tmp_path / "a.html")))
    assert ">task 1, rollout 2 of 2<" in (tmp_path / "a.html").read_text(encoding="utf-8")
    # a k the rows do not split into (4 rows, or rollouts holding other tasks) is not used
    src = _write(tmp_path, ROWS, stages={"simulate": {"best_of_n": 4}})
    visualize(ViewerOptions(input_path=str(src), output_path=str(tmp_path / "b.html")))
    text = (tmp_path / "b.html").read_text(encoding="utf-8")
    assert "names no k that fits the file" in text and ">task 3, rollout 1 of 1<" in text


FRONTEND_ROWS = [{"task": {"problem_description": "A bakery page.",
                           "ground_truth": "<html><body>Bakery</body></html>"},
                  "dialogue_history": [{"role": "user", "content": "A bakery page."}],
                  "answer": "<html></html>", "answer_screenshot": "shots/a.png"}]


def _run(script, src, out):
    return subprocess.run([sys.executable, script, str(src), str(out)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_backend_viewer_refuses_a_frontend_file(tmp_path):
    src, out = _write(tmp_path, FRONTEND_ROWS), tmp_path / "page.html"
    done = _run(BACKEND_VIEWER, src, out)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {src} holds frontend (design) dialogues, not backend (code) ones: view it "
        "with visualizers/visualize_design_dialogue_histories.py")
    assert not out.exists() and not (tmp_path / "page.html.config.json").exists()


def test_the_design_viewer_refuses_a_backend_file(tmp_path):
    src, out = _write(tmp_path, ROWS), tmp_path / "page.html"
    done = _run(DESIGN_VIEWER, src, out)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {src} holds backend (code) dialogues, not frontend (design) ones: view it "
        "with visualizers/visualize_dialogue_histories.py")
    assert not out.exists() and not (tmp_path / "page.html.config.json").exists()
    with pytest.raises(WrongViewer):  # called as a function: a ValueError, nothing written
        visualize_design(DesignViewerOptions(input_path=str(src), output_path=str(out)))
    assert not out.exists()


def test_how_the_two_kinds_are_told_apart():
    def kind(row):
        return file_kind([Trajectory.from_dict(row)])

    assert kind(ROWS[0]) == "backend" and kind(FRONTEND_ROWS[0]) == "frontend"
    plain = {"task": {"problem_description": "p", "ground_truth": "def f(): pass"},
             "dialogue_history": [], "answer": ""}
    assert kind(plain) is None  # neither viewer refuses what it cannot tell
    page_turn = dict(plain, dialogue_history=[{"role": "assistant", "content": "c",
                                               "html": None}])
    assert kind(page_turn) == "frontend"
    markup = dict(plain, task={"problem_description": "p", "ground_truth": " <div></div>"})
    assert kind(markup) == "frontend"
    assert file_kind([Trajectory.from_dict(r) for r in (FRONTEND_ROWS[0], ROWS[0])]) == "backend"
