"""evaluate_code keeps each test's result in the row (``test_results``), rewards unchanged,
and the backend viewer reads them back with the task and rollout of each row."""

import json

from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code
from sweet_rl.io import read_jsonl
from visualizers.visualize_dialogue_histories import ViewerOptions, visualize

DOUBLE = {"problem_description": "Double a number.", "ground_truth": "def f(x):\n    return 2 * x",
          "test_cases": {"test1": "f(1)", "test2": "f(5)"}}
NEGATE = {"problem_description": "Negate a number.", "ground_truth": "def g(x):\n    return -x",
          "test_cases": {"test1": "g(3)", "test2": "g(0)", "test3": "g('a')"}}


def _row(task, answer):
    return {"task": task, "answer": answer,
            "dialogue_history": [{"role": "user", "content": task["problem_description"]},
                                 {"role": "assistant", "content": answer, "input": "P",
                                  "output": answer}]}


def test_rows_keep_test_results_and_the_viewer_shows_them(tmp_path, capsys):
    rows = [_row(DOUBLE, "def f(x):\n    return 2 * x"),           # task 1, rollout 1
            _row(NEGATE, "def g(x):\n    return -x"),              # task 2, rollout 1
            _row(DOUBLE, "def f(x):\n    return x + 1"),           # task 1, rollout 2
            _row(NEGATE, "def g(x):\n    return 0 - x")]           # task 2, rollout 2
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    evaluate_code(EvaluateCodeOptions(saved_path=str(path), k=2, workers=1))
    graded = read_jsonl(str(path))
    assert [r["reward"] for r in graded] == [1.0, 2 / 3, 0.5, 2 / 3]
    # the reference itself fails on g('a'): no test of that task can pass, whatever the answer
    assert graded[1]["grader_tests"] == ["pass", "pass", "reference:error"]
    assert graded[2]["test_results"] == [
        {"test": "f(1)", "passed": True, "expected": "2", "got": "2"},
        {"test": "f(5)", "passed": False, "expected": "10", "got": "6"},
    ]
    assert graded[3]["test_results"][2] == {
        "test": "g('a')", "passed": False, "expected": "reference error: TypeError",
        "got": "error: TypeError"}
    capsys.readouterr()

    page = tmp_path / "run.html"
    visualize(ViewerOptions(input_path=str(path), output_path=str(page)))
    text = page.read_text(encoding="utf-8")
    third = text.split('id="dialogue-2"', 1)[1].split("</section>", 1)[0]
    assert ">task 1, rollout 2 of 2</span>" in third
    assert '<h3 class="tests">Tests: 1 of 2 passed</h3>' in third
    assert ("<tr><td>2</td><td><pre>f(5)</pre></td><td><pre>10</pre></td><td><pre>6</pre></td>"
            "<td>fail</td></tr>") in third
    assert "(evaluate_code --k in the sidecar)" in text
