"""The sandbox's wire format and the grader-side comparison rules, in-process.

Encoding runs in the sandboxed child, decoding and comparing in the grader; here both run in
the test process. The expected verdicts follow the published grader's pass rule:
``reference == answer and reference is not None``, the reference on the left, a ValueError
meaning "not passed" (see tests/fidelity/test_grading_table.py for the same through the sandbox).
"""

import collections
import datetime
import decimal
import fractions
import math

import pytest

from sweet_rl.grading.sandbox import sandbox_values
from sweet_rl.grading.compare import (NumpyArray, NumpyScalar, Opaque, TypeName, resolve,
                                      verdict)
from sweet_rl.grading.decode import DecodeError, decode
from sweet_rl.grading.sandbox.sandbox_values import MAX_DEPTH, MAX_NODES, encode, encode_comparison


def outputs_match(reference, answer) -> bool:
    """The benchmark's pass rule on decoded values, as the grader applies it (a chain that
    raises fails)."""
    try:
        reference, answer = resolve(reference), resolve(answer)
    except Exception:  # noqa: BLE001
        return False
    return verdict(reference, answer) == "pass"


def trip(value):
    return decode(encode(value))


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**80,
        -(2**70),
        1.5,
        -0.0,
        float("inf"),
        -float("inf"),
        1e300,
        1 + 2j,
        "text",
        "",
        'a"b\\',
        "über\n",
        "\ud800",
        b"\x00\xff",
        bytearray(b"ab"),
        [1, [2, (3, 4)]],
        (),
        [],
        {},
        set(),
        {"a": {1, 2}, (1, 2): frozenset({3})},
        range(1, 9, 2),
        range(-(2**70), 0),
        datetime.datetime(2024, 2, 29, 12, 30),
        datetime.date(2020, 1, 1),
        datetime.time(5, 6),
        datetime.timedelta(days=2, seconds=3),
        decimal.Decimal("1.10"),
        fractions.Fraction(2, 6),
        collections.deque([1, 2], maxlen=4),
        collections.OrderedDict([("b", 1), ("a", 2)]),
        collections.Counter("aab"),
        list(range(300)),
        [i / 3 for i in range(300)],
        ["s"] * 300,
        tuple(range(-300, 0)),
        [2**70] * 300,
    ],
)
def test_round_trip_keeps_value_and_type(value):
    back = trip(value)
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize(
    "value",
    [
        0,
        -7,
        2**53 - 1,
        -(2**53) + 1,
        2**53,
        "",
        'a"b\\',
        "über\n",
        "\ud800",
        1.5,
        -0.0,
        1e300,
        True,
        False,
        None,
    ],
)
def test_shortcut_for_common_values_writes_what_the_general_path_writes(value):
    general = sandbox_values._encode_stream((value,), None)
    assert encode(value) == general
    assert decode(encode(value)) == value


def test_the_format_is_flat_json_tokens():
    assert encode([1, "a", None, 2.5, [True]]) == '["l5",1,"\'a",null,2.5,"l1",true]'
    assert encode({"k": (1,)}) == '["d1","\'k","t1",1]'
    assert encode(float("nan")) == '"fnan"' and encode(math.nan) == '"fnan:math"'
    # long runs of numbers or strings travel packed: one token for 300 items
    assert len(encode(list(range(300))).split(",")) == 2
    assert encode(["x"] * 300).startswith('["l300",["x","x"')


def test_library_subclasses_keep_their_comparison_rules():
    # OrderedDict compares order against another OrderedDict, not against a dict
    ordered = trip(collections.OrderedDict([("b", 1), ("a", 2)]))
    assert type(ordered) is collections.OrderedDict and list(ordered) == ["b", "a"]
    moved = collections.OrderedDict([("a", 1), ("b", 2)])
    moved.move_to_end("a")  # its own order, not the dict's insertion order
    assert list(trip(moved)) == ["b", "a"]
    # Counter keeps its zero counts (Counter == Counter ignores them, Python >= 3.10)
    counts = trip(collections.Counter({"a": 1, "b": 0}))
    assert type(counts) is collections.Counter and dict(counts) == {"a": 1, "b": 0}
    assert outputs_match(counts, trip(collections.Counter({"a": 1})))
    assert not outputs_match(counts, {"a": 1})  # vs a dict: dict equality, the zero counts
    point = collections.namedtuple("Point", "x y")(1, 2)
    assert type(trip(point)) is tuple and trip(point) == (1, 2)
    assert type(trip(collections.defaultdict(int, a=1))) is dict


def test_dict_views_are_real_views():
    keys, items, values = (
        trip({"a": 1, "b": 2}.keys()),
        trip({"a": 1}.items()),
        trip({"a": 1}.values()),
    )
    assert outputs_match(keys, trip({"b": 3, "a": 4}.keys())) and outputs_match(keys, {"a", "b"})
    assert outputs_match(keys, frozenset("ab")) and not outputs_match(keys, ["a", "b"])
    assert outputs_match(items, {("a", 1)}) and not outputs_match(items, {("a", 2)})
    assert not outputs_match(values, trip({"a": 1}.values()))  # values views: identity only


def test_nan_keeps_which_object_it_was():
    # math.nan is one object: identity first inside containers makes [nan] == [nan]
    assert outputs_match(trip([math.nan]), trip([math.nan]))
    assert not outputs_match(trip([float("nan")]), trip([float("nan")]))  # fresh objects
    assert not outputs_match(trip(math.nan), trip(math.nan))  # bare: NaN != NaN
    fresh = trip(float("nan"))
    assert math.isnan(fresh) and fresh is not trip(float("nan"))


def test_an_object_equal_to_everything_equals_nothing():
    class Anything:
        def __eq__(self, other):
            return True

    class SneakyInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    spoof = trip(Anything())
    assert isinstance(spoof, Opaque)
    assert not outputs_match(4, spoof) and not outputs_match(spoof, spoof)
    assert trip(SneakyInt(0)) == 0 and not outputs_match(4, trip(SneakyInt(0)))


def test_classes_compare_by_importable_name_only():
    assert outputs_match(trip(int), trip(int)) and not outputs_match(trip(int), trip(str))
    assert trip([type(1.0)]) == [TypeName("builtins.float")]
    local_class = type("Local", (), {})  # made by the code itself: not importable
    assert isinstance(trip(local_class), Opaque)


def test_pass_rule_matches_the_benchmark():
    assert outputs_match(1, 1.0) and outputs_match(True, 1)  # Python's own equality
    assert not outputs_match(None, None)  # a None reference never passes
    assert verdict([1, 2], [1, 2]) == "pass" and verdict([1, 2], [2, 1]) == "fail"
    assert verdict({"a": [1]}.items(), {("a", 1)}) == "fail:TypeError"  # unhashable pair


# (reference, answer, verdict) with arrays as numpy 2 decides reference == answer:
# one-element results decide by their element, larger or empty ones raise ValueError
ARRAY_CASES = [
    (NumpyArray("i", (1,), [3]), 3, "pass"),
    (3, NumpyArray("i", (1,), [3]), "pass"),  # int gives NotImplemented; the reflected == decides
    (NumpyArray("i", (1,), [3]), [3], "pass"),
    (NumpyArray("i", (1, 1), [3]), NumpyArray("i", (1,), [3]), "pass"),
    (NumpyArray("i", (2,), [1, 2]), NumpyArray("i", (2,), [1, 2]), "fail:ValueError"),
    (NumpyArray("i", (2,), [1, 2]), [1, 2], "fail:ValueError"),
    (NumpyArray("f", (0,), []), NumpyArray("f", (0,), []), "fail:ValueError"),
    (NumpyArray("i", (2,), [1, 2]), [1, 2, 3], "fail:ValueError"),  # cannot broadcast
    (NumpyArray("i", (1,), [1]), [[1, 2], [3]], "fail:ValueError"),  # ragged
    (NumpyArray("i", (1,), [1]), "1", "fail"),
    (NumpyArray("i", (1,), [1]), None, "fail"),
    (NumpyArray("U", (1,), ["a"]), ["a"], "pass"),
    (NumpyArray("b", (1,), [True]), 1, "pass"),
    (NumpyArray("f", (1,), [math.nan]), NumpyArray("f", (1,), [math.nan]), "fail"),  # no identity
    ([NumpyArray("i", (1,), [5])], [NumpyArray("i", (1,), [5])], "pass"),
    ([NumpyArray("i", (2,), [5, 6])], [NumpyArray("i", (2,), [5, 6])], "fail:ValueError"),
    (NumpyScalar("f", 3.0), [3.0], "pass"),
    (NumpyScalar("f", 3.0), [3.0, 3.0], "fail:ValueError"),
    (NumpyScalar("f", 2.5), 2.5, "pass"),
    (2.5, NumpyScalar("f", 2.5), "pass"),
    (NumpyScalar("i", 2), "2", "fail"),
    ({NumpyScalar("i", 1): 2}, {1: 2}, "pass"),  # hashable, hashes as its number
]


@pytest.mark.parametrize("reference, answer, expected", ARRAY_CASES)
def test_arrays_compare_as_numpy_does(reference, answer, expected):
    assert verdict(reference, answer) == expected


def test_array_stand_in_agrees_with_numpy():
    np = pytest.importorskip("numpy")
    values = [np.array([3]), np.array([[3]]), np.array([1, 2]), np.array([]), np.array(["a"]),
              np.array([1.5, 2.5]), np.float64(3.0), np.int64(2), np.array([[1, 2], [3, 4]]),
              3, [3], [1, 2], [[1], [2]], "a", None, 2.5]
    for left in values:
        for right in values:
            try:  # the published pass rule, in place, on the real values
                real = bool(left == right and left is not None)
            except ValueError:  # (numpy 1 said False where numpy 2 raises: both fail)
                real = False
            assert (verdict(trip(left), trip(right)) == "pass") == real, (left, right)


def test_python_numbers_meet_narrow_numpy_types_as_numpy_2_compares_them():
    # NEP 50: a Python number takes the numpy value's type before they compare (so the
    # original grader's ``0.1 == np.float32(0.1)`` holds under numpy 2); a list does not
    np = pytest.importorskip("numpy")
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip(f"numpy {np.__version__}: Python numbers are weak from numpy 2 on")
    values = [np.float32(0.1), np.float16(0.1), np.complex64(0.1 + 0.2j),
              np.array([0.1], dtype=np.float32), np.array([0.1, 0.2], dtype=np.float16),
              np.float32(16777216), np.float32(np.inf), np.int64(2 ** 53 + 1), np.uint8(255),
              np.int8(-1), np.float64(0.1), np.array([0.1]), 0.1, 0.2, 1e39, 16777217,
              float(2 ** 53), 0.1 + 0.2j, [0.1], (0.1,), True, -1, 255, 1 << 2000]
    with np.errstate(all="ignore"):
        for left in values:
            for right in values:
                try:  # the published pass rule, in place, on the real values
                    real = bool(left == right and left is not None)
                except (ValueError, OverflowError):
                    real = False
                ours = verdict(trip(left), trip(right))
                assert (ours == "pass") == real, (left, right, ours)


def test_broadcast_results_follow_numpy_order():
    np = pytest.importorskip("numpy")
    column, row = np.arange(3).reshape(3, 1), np.array([[0, 1, 2, 3]])
    result = trip(column) == trip(row)
    assert isinstance(result, NumpyArray) and result.shape == (3, 4)
    assert result.items == (column == row).ravel().tolist()
    assert trip(np.array([[1, 2], [3, 4]])).items == [1, 2, 3, 4]
    assert trip(np.arange(400) / 4).items == [i / 4 for i in range(400)]  # packed


def test_comparison_chains_are_applied_in_the_grader():
    chain = decode(encode_comparison(["<", "<="], [0, 2, 4]))
    assert resolve(chain) is True
    assert resolve(decode(encode_comparison(["=="], [[1], [1]]))) is True
    assert resolve(decode(encode_comparison(["in"], [3, [1, 2]]))) is False
    assert resolve(decode(encode_comparison(["id1"], [None, None]))) is True
    spoof = type("Anything", (), {"__eq__": lambda self, other: True})()
    assert resolve(decode(encode_comparison(["=="], [spoof, 2]))) is False
    # a single link gives its result as it is: an array of booleans
    assert isinstance(resolve(decode('["?==","ai2",1,2,1]')), NumpyArray)
    with pytest.raises(DecodeError):  # a chain only as the whole output
        decode('["l1","?==",1,2]')


# millions of values encoded and decoded at the depth limit (seconds)
@pytest.mark.slow
def test_large_and_deep_values_come_through_and_compare():
    deep = 0
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert verdict(trip(deep), trip(deep)) == "pass"
    big = [str(i) for i in range(2_000_000)]
    assert verdict(trip(big), trip(big)) == "pass"
    nested = [(i, i / 2) for i in range(700_000)]  # 2.1 million values, one at a time
    assert verdict(trip(nested), trip(nested)) == "pass"


def test_values_over_the_bounds_become_opaque():
    deeper = [0]
    for _ in range(MAX_DEPTH):
        deeper = [deeper]
    assert isinstance(trip(deeper), Opaque)
    assert isinstance(trip([[0]] * (MAX_NODES // 2 + 1)), Opaque)
    assert isinstance(trip("x" * (sandbox_values.MAX_BYTES + 1)), Opaque)
    cycle = []
    cycle.append(cycle)
    assert isinstance(trip(cycle), Opaque)


@pytest.mark.parametrize(
    "text",
    [
        '{"zz": 1}',
        '"l5"',
        '["l1",1,2]',
        "not json",
        '["d1","l0",1]',
        '"Zoo"',
        '["zz"]',
        "NaN",
        '["l1",[1]]',
        '"pdAAAA"',
        '"q-1,"',
        '"ai,2"',
        '"fnan:other"',
        '["?==",1,2,3]',
        '"I0x' + "f" * 200_000 + '"',
    ],
)
def test_malformed_wire_text_is_refused(text):
    with pytest.raises(DecodeError):
        decode(text)


def test_decoding_refuses_what_would_stall_the_grader():
    # many equal hashes: ints k * (2**61 - 1) all hash to 0, each insert compares with all
    colliding = encode({k * (2 ** 61 - 1) for k in range(1, 200)})
    with pytest.raises(DecodeError, match="hashes"):
        decode(colliding)
    # Counter.__eq__ compares each key twice: nested Counters cost 2 ** depth
    counters = 1
    for _ in range(8):
        counters = collections.Counter({"k": counters})
    with pytest.raises(DecodeError, match="nested"):
        decode(encode(counters))


