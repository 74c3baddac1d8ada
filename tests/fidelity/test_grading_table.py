"""Backend grading cases with the score the published grader gives, through the real sandbox.

Each row: an answer (chat text, as the agent writes it), a reference solution, test
expressions, the expected score under ``--grader benchmark`` (the original's rules) and, where
it differs or is interesting, under ``--grader strict``. The comment above each row derives the
benchmark score from the published grader's rules:

- R1: an answer whose whole text contains ``import os``, ``from os``, ``import sys``,
  ``from sys``, ``sudo``, ``transformers``, ``exit(``, ``quit(`` or ``argparse`` scores 0;
- R2: the code is the text after the first ```` ```python ```` up to the next ```` ``` ````,
  else between the first two ```` ``` ````;
- R3: per test, the code is ``exec``'d inside a function of the grader's module: its globals
  are that module's (``signal``, ``multiprocessing``, ``Empty`` imported; ``__name__`` is
  ``sweet_rl.utils.code_utils``), its locals the function's (``function_definition``,
  ``test_case``) plus what the code defines; then the test is ``eval``'d there. Any
  exception gives the output None;
- R4: a test passes when ``reference_output == answer_output and reference_output is not
  None`` is true, the reference on the left; a ValueError raised there means not passed.

Rows marked ``ours`` are deliberate differences (docs/differences.md).
"""

from dataclasses import dataclass, field
from typing import Dict, Optional

import pytest

from sweet_rl.grading.grader import Grader
from tests.conftest import once_per_run

pytestmark = pytest.mark.slow  # the whole table graded in the sandbox


def fenced(code: str) -> str:
    return f"Here is the function.\n```python\n{code}```\nLet me know if it works."


@dataclass
class Row:
    name: str
    answer: str
    reference: str
    tests: Dict[str, str]
    benchmark: float
    strict: Optional[float] = None  # None: the same as under benchmark rules
    ours: str = ""  # why the original scores it differently, for deliberate differences
    words: Dict[str, list] = field(default_factory=dict)  # expected verdict words per rule set


INC = "def f(x):\n    return x + 1\n"
TWO = {"a": "f(1)", "b": "f(2)"}
NP = "    import numpy as np\n"
MATH = "    import math\n"
OD = "    from collections import OrderedDict\n"
COUNTER = "    from collections import Counter\n"
ONE = {"a": "f()"}
ANYTHING = (
    "def f(x):\n    class Anything:\n        def __eq__(self, other):\n            return True\n"
    "    return Anything()\n"
)
DOUBLE = "def f(x):\n    return 2 * x\n"
MAYBE_NONE = "def f(x):\n    return None if x < 0 else x\n"
DEEP = ("def f(kind):\n    x = 0\n    for i in range(1000):\n"
        "        x = [x] if kind == 0 else {'k': x} if i % 2 else (x,)\n    return x\n")


def returns(body: str, imports: str = "") -> str:
    """A function f() that imports inside itself (top-level imports are invisible, R3)."""
    return f"def f():\n{imports}    return {body}\n"


ROWS = [
    # R1 on the whole text: "sudo" is in the prose, outside the fence -> 0. Strict rules keep no
    # list.
    Row(
        "sudo_in_prose",
        "No need to run it with sudo.\n```python\n" + INC + "```",
        INC,
        TWO,
        0.0,
        1.0,
    ),
    # R1: "exit(" in the prose -> 0.
    Row("exit_in_prose", fenced(INC) + "\nCall exit() when you are done.", INC, TWO, 0.0, 1.0),
    # R2 cuts the code out of the fence; nothing blocked; both tests equal -> 1.
    Row("fenced_clean", fenced(INC), INC, TWO, 1.0),
    # R2: a ```py fence is not ```python: the code is the text between the first two ```,
    # which starts with the word "py" -> NameError on exec -> None != 2 and 3 -> 0, both rules.
    Row("py_fence", "```py\n" + INC + "```", INC, TWO, 0.0),
    # R3: __name__ is the grader module's name, so the __main__ block does not run (it would
    # raise) and the tests pass -> 1. Strict rules run a module named __sandboxed__: same.
    Row(
        "main_block_skipped",
        fenced(INC + "\nif __name__ == '__main__':\n    raise RuntimeError('ran')\n"),
        INC,
        TWO,
        1.0,
    ),
    # R3: __name__ read inside the function is the grader module's name; the reference
    # returns that text -> 1. Strict: "__sandboxed__" differs -> 0.
    Row(
        "module_name",
        fenced("def f(x):\n    return __name__\n"),
        "def f(x):\n    return 'sweet_rl.utils.code_utils'\n",
        {"a": "f(1)"},
        1.0,
        0.0,
    ),
    # R3: signal, Empty and multiprocessing are the grader module's globals, usable without
    # an import -> (3, 'Empty', 'MainProcess') == reference -> 1. Strict: NameError -> 0.
    Row(
        "grader_module_names",
        fenced(
            "def f(x):\n    return (int(signal.SIGINT) + x, Empty.__name__, "
            "multiprocessing.current_process().name)\n"
        ),
        "def f(x):\n    return (2 + x, 'Empty', 'MainProcess')\n",
        {"a": "f(1)"},
        1.0,
        0.0,
    ),
    # R3: test_case is a local of the grader's function: f receives the test's own text, in
    # the reference and the answer alike -> 1. Strict rules have no such name: the reference
    # raises NameError -> None -> not passed -> 0.
    Row(
        "function_locals",
        fenced("def f(x):\n    return x.upper()\n"),
        "def f(x):\n    return x.upper()\n",
        {"a": "f(test_case)"},
        1.0,
        0.0,
    ),
    # R3: the grader's function has a local `e` (its `except ... as e`), unbound while the
    # test is evaluated, so the code's top-level `e` is dropped from the locals: the test's
    # `e` is a NameError in the reference too -> None -> 0. Strict: e is 2 -> 1.
    Row(
        "local_e_dropped",
        fenced("e = 2\ndef f():\n    return 1\n"),
        "e = 2\ndef f():\n    return 1\n",
        {"a": "f() + e"},
        0.0,
        1.0,
    ),
    # R3: top-level helpers land in the locals, invisible from inside f (globals only) ->
    # NameError -> None -> 0. Strict rules run a module -> 1.
    Row(
        "helper_invisible",
        fenced("def twice(x):\n    return 2 * x\n\ndef f(x):\n    return twice(x)\n"),
        "def f(x):\n    return 2 * x\n",
        TWO,
        0.0,
        1.0,
    ),
    # R3: a `global` statement writes the grader module's globals, which the original keeps
    # from one test to the next (count 1, then 2 -> 1 of 2 tests -> 0.5). Ours: a fresh copy
    # per test, both tests return 1 -> 1.
    Row(
        "global_does_not_leak",
        fenced(
            "def f(x):\n    global calls\n    calls = globals().get('calls', 0) + 1\n"
            "    return calls\n"
        ),
        "def f(x):\n    return 1\n",
        TWO,
        1.0,
        ours="the original's module globals leak between tests: 0.5",
    ),
    # R4: OrderedDict == OrderedDict compares order: ('a','b') vs ('b','a') -> False -> 0.
    Row(
        "ordered_dict_order",
        fenced(returns("OrderedDict([('b', 2), ('a', 1)])", OD)),
        returns("OrderedDict([('a', 1), ('b', 2)])", OD),
        ONE,
        0.0,
    ),
    # R4: OrderedDict == dict compares as dicts: order ignored -> 1.
    Row(
        "ordered_dict_vs_dict",
        fenced(returns("{'b': 2, 'a': 1}")),
        returns("OrderedDict([('a', 1), ('b', 2)])", OD),
        ONE,
        1.0,
    ),
    # R4 (Python >= 3.10): Counter == Counter ignores zero counts -> 1.
    Row(
        "counter_zero_counts",
        fenced(returns("Counter({'a': 1})", COUNTER)),
        returns("Counter({'a': 1, 'b': 0})", COUNTER),
        ONE,
        1.0,
    ),
    # R4: Counter == dict falls back to dict equality: the zero count matters -> 0.
    Row(
        "counter_vs_dict",
        fenced(returns("{'a': 1}")),
        returns("Counter({'a': 1, 'b': 0})", COUNTER),
        ONE,
        0.0,
    ),
    # R4: 3 == np.array([3]) -> int gives NotImplemented, the array's reflected == gives
    # array([True]), one element: its truth is True -> 1.
    Row("numpy_size_one_vs_int", fenced(returns("np.array([3])", NP)), returns("3"), ONE, 1.0),
    # R4: np.array([3]) == [3] -> array([True]) -> 1.
    Row("numpy_size_one_vs_list", fenced(returns("[3]")), returns("np.array([3])", NP), ONE, 1.0),
    # R4: equal arrays of two elements -> array([True, True]), whose truth value raises
    # ValueError -> not passed -> 0.
    Row(
        "numpy_size_two",
        fenced(returns("np.array([1, 2])", NP)),
        returns("np.array([1, 2])", NP),
        ONE,
        0.0,
        words={"benchmark": ["fail:ValueError"]},
    ),
    # R4: empty arrays -> an empty result, whose truth value raises (numpy 2; numpy 1 said
    # False) -> 0.
    Row("numpy_empty", fenced(returns("np.array([])", NP)), returns("np.array([])", NP), ONE, 0.0),
    # R4: shapes (2,) and (3,) cannot broadcast: == raises ValueError -> 0.
    Row(
        "numpy_no_broadcast",
        fenced(returns("[1, 2, 3]")),
        returns("np.array([1, 2])", NP),
        ONE,
        0.0,
    ),
    # R4 inside a list: [a] == [b] takes the truth of a == b: one element -> True -> 1 ...
    Row(
        "numpy_in_list_size_one",
        fenced(returns("[np.array([5])]", NP)),
        returns("[np.array([5])]", NP),
        ONE,
        1.0,
    ),
    # ... and two elements -> ValueError -> 0.
    Row(
        "numpy_in_list_size_two",
        fenced(returns("[np.array([5, 6])]", NP)),
        returns("[np.array([5, 6])]", NP),
        ONE,
        0.0,
    ),
    # R4: np.float64(3.0) == [3.0] broadcasts -> array([True]) -> 1.
    Row("numpy_scalar_vs_list", fenced(returns("[3.0]")), returns("np.float64(3.0)", NP), ONE, 1.0),
    # R4: keys views compare like sets: {'a','b'} == {'b','a'} -> 1.
    Row(
        "keys_view",
        fenced(returns("{'b': 2, 'a': 1}.keys()")),
        returns("{'a': 1, 'b': 2}.keys()"),
        ONE,
        1.0,
    ),
    # R4: a keys view equals a set with the same members -> 1.
    Row(
        "keys_view_vs_set",
        fenced(returns("{'a', 'b'}")),
        returns("{'a': 1, 'b': 2}.keys()"),
        ONE,
        1.0,
    ),
    # R4: a keys view never equals a list -> 0.
    Row(
        "keys_view_vs_list",
        fenced(returns("['a', 'b']")),
        returns("{'a': 1, 'b': 2}.keys()"),
        ONE,
        0.0,
    ),
    # R4: an items view equals the set of its pairs -> 1.
    Row("items_view_vs_set", fenced(returns("{('a', 1)}")), returns("{'a': 1}.items()"), ONE, 1.0),
    # R4: values views compare by identity: two different views -> 0.
    Row(
        "values_view", fenced(returns("{'a': 1}.values()")), returns("{'a': 1}.values()"), ONE, 0.0
    ),
    # R4: inside a list Python compares by identity first; math.nan is one object in the
    # grading process -> [nan] == [nan] -> 1.
    Row(
        "nan_singleton_in_list",
        fenced(returns("[math.nan]", MATH)),
        returns("[math.nan]", MATH),
        ONE,
        1.0,
    ),
    # R4: numpy.nan is one object too -> 1.
    Row(
        "numpy_nan_singleton_in_list",
        fenced(returns("[np.nan]", NP)),
        returns("[np.nan]", NP),
        ONE,
        1.0,
    ),
    # R4: numpy.nan and math.nan are different objects, and NaN != NaN -> 0.
    Row(
        "numpy_nan_vs_math_nan",
        fenced(returns("[math.nan]", MATH)),
        returns("[np.nan]", NP),
        ONE,
        0.0,
    ),
    # R4: float('nan') makes a new object each time: two different NaNs -> 0.
    Row(
        "fresh_nan_in_list", fenced(returns("[float('nan')]")), returns("[float('nan')]"), ONE, 0.0
    ),
    # R4: a bare NaN never equals, even the singleton (no container, no identity shortcut) -> 0.
    Row(
        "bare_nan_singleton", fenced(returns("math.nan", MATH)), returns("math.nan", MATH), ONE, 0.0
    ),
    # R4: equal values 1,000 levels deep (lists; then dicts and tuples) -> 1. The original's
    # == recurses past Python's default limit of 1,000 and raises RecursionError, which its
    # grader does not catch; ours compares them with enough room.
    Row(
        "deep_output",
        fenced(DEEP),
        DEEP,
        {"a": "f(0)", "b": "f(1)"},
        1.0,
        ours="the original's == passes Python's recursion limit: RecursionError stops its "
        "whole run",
    ),
    # R4: two million values compare equal in place -> 1.
    Row(
        "large_output",
        fenced(returns("[str(i % 10) for i in range(2_000_000)]")),
        returns("[str(i % 10) for i in range(2_000_000)]"),
        ONE,
        1.0,
    ),
    # R4: a nested output of about 2.1 million values (700,000 pairs) -> 1.
    Row(
        "large_nested_output",
        fenced(returns("[(i, i / 2) for i in range(700_000)]")),
        returns("[(i, i / 2) for i in range(700_000)]"),
        ONE,
        1.0,
    ),
    # R4: more values than the wire format carries (2.5 million): ours fails the test.
    Row(
        "beyond_the_bounds",
        fenced(returns("list(range(3_000_000))")),
        returns("list(range(3_000_000))"),
        ONE,
        0.0,
        ours="the original compares any size in place: 1",
    ),
    # R4: "and reference_output is not None": f(-1) is None in both -> not passed; f(1)
    # passes -> 0.5.
    Row(
        "reference_none",
        fenced(MAYBE_NONE),
        MAYBE_NONE,
        {"a": "f(-1)", "b": "f(1)"},
        0.5,
        words={"benchmark": ["reference:None", "pass"]},
    ),
    # R4: 2 == Anything() -> int gives NotImplemented, the answer's reflected __eq__ says True:
    # the original passes it (1). Ours never runs an answer's method: an opaque value -> 0.
    Row(
        "always_equal",
        fenced(ANYTHING),
        DOUBLE,
        {"a": "f(1)"},
        0.0,
        ours="the answer's __eq__ decides in the original: 1",
    ),
    # R3/R4: a comparing test is evaluated whole in the child under benchmark rules:
    # Anything() == 2 is True, as the reference's 2 == 2 -> True == True -> 1. Strict rules
    # compare the operands in the grader: opaque == 2 is False != True -> 0.
    Row("always_equal_comparing_test", fenced(ANYTHING), DOUBLE, {"a": "f(1) == 2"}, 1.0, 0.0),
    # A comparing test and an honest answer: True == True under both rules -> 1.
    Row(
        "comparing_test_honest",
        fenced(DOUBLE),
        DOUBLE,
        {"a": "f(1) == 2", "b": "0 < f(2) <= 4", "c": "f(3) in [6, 7]"},
        1.0,
    ),
    # A comparing test and a wrong answer: False != True -> 0, both rules.
    Row(
        "comparing_test_wrong",
        fenced("def f(x):\n    return 3 * x\n"),
        DOUBLE,
        {"a": "f(1) == 2"},
        0.0,
    ),
    # Identity links: None is None and type(...) is int hold in reference and answer -> 1.
    Row(
        "comparing_test_identity",
        fenced(MAYBE_NONE),
        MAYBE_NONE,
        {"a": "f(-1) is None", "b": "type(f(1)) is int"},
        1.0,
    ),
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every row graded under both rule sets, one batch each, in the real sandbox (2 s per
    test rather than 1: encoding a two-million-value output counts toward a test's time here,
    and this machine is shared), once in a run: the rows' tests are spread over the workers."""
    def grade_table():
        results = {}
        for rules in ("benchmark", "strict"):
            scratch = tmp_path_factory.mktemp(f"grading_{rules}")
            grader = Grader(rules, timeout=2.0, memory_mb=2048, workers=2,
                            scratch_root=str(scratch))
            graded = grader.grade([(r.answer, r.reference, r.tests) for r in ROWS])
            results[rules] = dict(zip([row.name for row in ROWS], graded))
        return results

    return once_per_run(tmp_path_factory, "grading_table", grade_table)


def test_row_names_are_unique():
    assert len({row.name for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_score_as_the_original_rules_give(graded, row):
    for rules, expected in (("benchmark", row.benchmark),
                            ("strict", row.benchmark if row.strict is None else row.strict)):
        result = graded[rules][row.name]
        assert result.reward == expected, (rules, result.tests)
        if rules in row.words:
            assert result.tests == row.words[rules]


def test_blocked_words_are_reported(graded):
    assert graded["benchmark"]["sudo_in_prose"].blocked_word == "sudo"
    assert graded["benchmark"]["exit_in_prose"].blocked_word == "exit("
    assert graded["strict"]["sudo_in_prose"].blocked_word is None
