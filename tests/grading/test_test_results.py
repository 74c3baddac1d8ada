"""The per-test results a graded answer keeps: which test, passed or not, expected vs got.

The texts are made from decoded outputs by a bounded writer, so an answer that returns a
huge or deeply nested value still gives a short text, quickly, and no reward changes."""

import collections
import time

from sweet_rl.grading.decode import decode
from sweet_rl.grading.grader import Grader, judge
from sweet_rl.grading.sandbox.sandbox_values import encode
from sweet_rl.grading.test_report import MAX_CHARS, short_repr

DOUBLE = "def f(x):\n    return x * 2\n"
TESTS = {"t1": "f(1)", "t2": "f(2)", "t3": "f(0)", "t4": "f(3)"}
# right on 1, a list on 2, ZeroDivisionError on 0, an endless loop on 3
ANSWER = ("def f(x):\n    if x == 0:\n        return 1 // x\n    if x == 3:\n"
          "        while True:\n            pass\n    return 2 if x == 1 else [x, 'two']\n")


def test_each_test_keeps_its_expression_verdict_and_both_outputs():
    blocked = "import os\n" + DOUBLE
    results = Grader("benchmark", timeout=1.0, memory_mb=512).grade(
        [(ANSWER, DOUBLE, TESTS), (blocked, DOUBLE, TESTS)])
    graded, refused = results
    assert (graded.reward, graded.tests) == (
        0.25, ["pass", "fail", "error:ZeroDivisionError", "timeout"])
    assert graded.test_results == [
        {"test": "f(1)", "passed": True, "expected": "2", "got": "2"},
        {"test": "f(2)", "passed": False, "expected": "4", "got": "[2, 'two']"},
        {"test": "f(0)", "passed": False, "expected": "0", "got": "error: ZeroDivisionError"},
        {"test": "f(3)", "passed": False, "expected": "6", "got": "timeout"},
    ]
    # a blocked answer runs nothing: neither its output nor the reference's is known
    assert refused.reward == 0.0 and refused.blocked_word == "import os"
    assert refused.test_results == [
        {"test": test, "passed": False, "expected": "(not run: the answer was blocked)",
         "got": "blocked"} for test in TESTS.values()]


def test_strict_comparing_tests_show_their_operands():
    tests = {"a": "f(1) == 2", "b": "f(2) == 4"}
    [result] = Grader("strict", timeout=1.0, memory_mb=512).grade([(ANSWER, DOUBLE, tests)])
    assert result.tests == ["pass", "fail"]
    assert [(r["expected"], r["got"]) for r in result.test_results] == [
        ("2 == 2", "2 == 2"), ("4 == 4", "[2, 'two'] == 4")]


def _wire(value):
    return ["ok", encode(value)]


def test_status_texts_name_what_went_wrong_on_either_side():
    assert judge(["error", "KeyError"], _wire(3), "g()") == (
        "reference:error",
        {"test": "g()", "passed": False, "expected": "reference error: KeyError", "got": "3"})
    assert judge(_wire(3), ["crash", "killed by SIGSEGV"], "g()")[1]["got"] == "crash"
    verdict, result = judge(_wire(3), ["ok", "[not a wire text"], "g()")
    assert (verdict, result["got"]) == ("crash", "crash (unreadable output)")
    assert judge(_wire(None), _wire(None), "g()")[0] == "reference:None"
    assert judge(_wire(None), _wire(None), "g()")[1]["expected"] == "None"


def _deep(levels):
    value = "core"
    for _ in range(levels):
        value = [value]
    return value


def test_a_hostile_huge_or_deep_output_gives_a_short_text_quickly():
    long_test = "f(" + "9" * 1000 + ")"
    huge = ["x" * (30 * 1024 * 1024), _deep(1000), list(range(500_000)),
            set(range(500_000)), collections.Counter({i: i for i in range(100_000)})]
    wire = _wire(huge)
    started = time.perf_counter()
    verdict, result = judge(_wire([1]), wire, long_test)
    assert verdict == "fail"
    assert len(result["got"]) <= MAX_CHARS and result["got"].startswith("['xxxx")
    assert result["got"].endswith("...") and len(result["test"]) == MAX_CHARS
    decoded = decode(wire[1])
    for part in [decoded] + decoded[1:]:
        started_part = time.perf_counter()
        text = short_repr(part)
        assert len(text) <= MAX_CHARS and time.perf_counter() - started_part < 0.05
    assert short_repr(decoded[1]) == "[[[[[[...]]]]]]"  # six levels shown, then "..."
    assert time.perf_counter() - started < 30  # decoding dominates; the texts cost nothing


def test_short_repr_of_each_kind_of_decoded_value():
    cases = {
        "{'a', 'b', 'c'}": {"c", "a", "b"},  # small sets sorted: the same text in every run
        "frozenset({(0, 1), (1, 2)})": frozenset({(1, 2), (0, 1)}),
        "(1,)": (1,),
        "{1: {2: 'x'}}": {1: {2: "x"}},
        "OrderedDict({'b': 1, 'a': 2})": collections.OrderedDict(b=1, a=2),
        "Counter({'z': 1})": collections.Counter(z=1),
        "deque([1, 2])": collections.deque([1, 2]),
        "dict_keys([1, 2])": {1: 0, 2: 0}.keys(),
        "<int of 700 bits>": 1 << 699,
        "range(0, 10, 2)": range(0, 10, 2),
        "set()": set(),
        "b'ab'": b"ab",
        "nan": float("nan"),
    }
    for text, value in cases.items():
        assert short_repr(decode(encode(value))) == text, value
    big = decode(encode({"k": "v" * 5000}))
    assert short_repr(big) == "{'k': '" + "v" * (MAX_CHARS - 10) + "..."


def test_numbers_and_strings_take_a_short_way_to_the_same_text_and_value():
    # the grading process writes and decodes these commonest outputs without the general
    # writer and token loop; the texts and values must be the general paths' to the letter
    from sweet_rl.grading.decode import _decode_tokens
    from sweet_rl.grading.test_report import _Full, _write, _Writer, cut

    def general(value, limit):
        writer = _Writer(limit + 1)
        try:
            _write(value, writer, 0)
        except _Full:
            pass
        return cut("".join(writer.parts), limit)

    values = ["", "x'y\"z", "a" * 197, "a" * 198, "a" * 199, "a" * 300, "\u00e9\n" * 150, 0, -3,
              10 ** 190, 1 << 640, 1.5, -0.0, float("inf"), float("nan"), True, None]
    for value in values:
        for limit in (MAX_CHARS, 5, 3, 2, 1, 0):
            assert short_repr(value, limit) == general(value, limit), (value, limit)
        wire = encode(value)
        tokens = __import__("json").loads(wire)
        expected = _decode_tokens(tokens if type(tokens) is list else [tokens])
        got = decode(wire)
        assert type(got) is type(expected) and repr(got) == repr(expected), value


def test_a_hostile_answer_graded_in_the_sandbox_keeps_a_short_text():
    hostile = ("def f(x):\n    value = 'core'\n    for _ in range(1000):\n"
               "        value = [value]\n    return ['x' * 30000000, value, set(range(400000))]\n")
    started = time.perf_counter()
    [result] = Grader("benchmark", timeout=2.0, memory_mb=1024).grade(
        [(hostile, DOUBLE, {"t1": "f(1)"})])
    assert result.tests == ["fail"]
    [entry] = result.test_results
    assert entry["expected"] == "2" and entry["got"].startswith("['xxx")
    assert len(entry["got"]) == MAX_CHARS and entry["got"].endswith("...")
    assert time.perf_counter() - started < 60
