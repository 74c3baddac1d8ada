"""Grading rules and verdicts on small hand-made tasks."""

import json

from sweet_rl.grading.grader import GradeResult, Grader

SQUARE = "def square(x):\n    return x * x\n"
TESTS = {"test1": "square(2)", "test2": "square(3)", "test3": "square(-1)", "test4": "square(0)"}


def grade(answer, rules="benchmark", reference=SQUARE, tests=TESTS, tmp_path=None):
    [result] = Grader(rules, timeout=1.0, memory_mb=512).grade([(answer, reference, tests)])
    return result


def test_reward_is_the_fraction_of_tests_passed():
    assert grade(SQUARE).reward == 1.0
    half = grade("def square(x):\n    return x * x if x > 0 else 7\n")
    assert (half.reward, half.passed, half.total) == (0.5, 2, 4)
    assert half.tests == ["pass", "pass", "fail", "fail"]


def test_code_is_cut_from_the_first_python_fence():
    chat = "Sure.\n```python\n" + SQUARE + "```\nand an aside\n```\nnot code\n```"
    assert grade(chat).reward == 1.0
    assert grade("```\n" + SQUARE + "```").reward == 1.0
    assert (
        grade("I WANT TO ANSWER: " + SQUARE).reward == 0.0
    )  # bare text is run as is: syntax error


def test_benchmark_word_list_blocks_without_running():
    answer = "def square(x):\n    # import os is not needed\n    return x * x\n"
    result = grade(answer)
    assert (result.reward, result.blocked_word) == (0.0, "import os")
    assert grade(answer, rules="strict").reward == 1.0
    # the published grader tests the whole answer before cutting the code out of its fence
    prose = "No sudo needed.\n```python\n" + SQUARE + "```"
    assert (grade(prose).reward, grade(prose).blocked_word) == (0.0, "sudo")
    assert grade(prose, rules="strict").reward == 1.0


def test_benchmark_rules_hide_top_level_names_from_the_function():
    helper = "import math\ndef square(x):\n    return int(math.pow(x, 2))\n"
    assert grade(helper).reward == 0.0
    assert grade(helper, rules="strict").reward == 1.0
    recursive = "def square(x):\n    return x * x if x >= 0 else square(-x)\n"
    assert grade(recursive).tests == ["pass", "pass", "error:NameError", "pass"]
    assert grade(recursive, rules="strict").reward == 1.0


def test_a_none_reference_output_never_passes():
    reference = "def f(x):\n    return None if x < 0 else x\n"
    result = grade(reference, reference=reference, tests={"a": "f(-1)", "b": "f(1)"})
    assert result.tests == ["reference:None", "pass"]


def test_sets_iterate_alike_in_reference_and_answer_processes():
    # the reference and the answer run in different processes (and tasks in different
    # workers); string hashing is seeded the same in every worker, so code that lists a set
    # of strings agrees with itself
    code = "def names(n):\n    return list({'w%d' % i for i in range(n)})\n"
    result = grade(code, reference=code, tests={f"t{n}": f"names({n})" for n in range(3, 13)})
    assert result.reward == 1.0


def test_references_run_once_for_k_rollouts(tmp_path):
    grader = Grader("benchmark", timeout=1.0, memory_mb=512, workers=2, scratch_root=str(tmp_path))
    items = [(SQUARE, SQUARE, TESTS), ("def square(x):\n    return 0\n", SQUARE, TESTS)] * 3
    results = grader.grade(items)
    assert [r.reward for r in results] == [1.0, 0.25] * 3  # square(0) == 0
    assert len(grader._reference_cache) == 1
    assert all(isinstance(r, GradeResult) for r in results)


def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    answers = ["def square(x):\n    return x * x if x != %d else 0\n" % k for k in range(-1, 4)]
    items = [(a, SQUARE, TESTS) for a in answers]
    one = Grader("benchmark", workers=1, scratch_root=str(tmp_path)).grade(items)
    two = Grader("benchmark", workers=2, scratch_root=str(tmp_path)).grade(items)
    assert [r.tests for r in one] == [r.tests for r in two]


def test_an_answer_never_shares_its_cpu_with_its_reference(tmp_path):
    # a grading thread's worker runs on one CPU: were the reference running while the answer
    # does, an honest answer's time limit would be eaten by its reference. Each test reports
    # when it ran (wall clock), so the check holds however busy the machine is: every
    # reference test ends before the first answer test starts
    busy = ("def spin(x):\n    import time\n    start = time.time()\n"
            "    cpu = time.thread_time()\n"
            "    while time.thread_time() - cpu < 0.3:\n        pass\n"
            "    return [start, time.time()]\n")
    grader = Grader("benchmark", timeout=10.0, workers=1, scratch_root=str(tmp_path))
    [result] = grader.grade([(busy, busy, {"a": "spin(1)", "b": "spin(2)"})])
    spans = [(json.loads(t["expected"]), json.loads(t["got"])) for t in result.test_results]
    assert len(spans) == 2
    last_reference_end = max(reference[1] for reference, _ in spans)
    first_answer_start = min(answer[0] for _, answer in spans)
    assert last_reference_end <= first_answer_start, spans
