"""The sandbox's wire format: values survive the trip, spoofs do not."""

import collections
import datetime
import decimal
import fractions
import math

import pytest

from sweet_rl.evaluation.sandbox_confine import seccomp_program
from sweet_rl.evaluation.sandbox_values import (MAX_NODES, DecodeError, Opaque, decode, encode,
                                                outputs_match)


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2 ** 80, 1.5, -0.0, float("inf"), 1 + 2j, "text", b"\x00\xff",
    bytearray(b"ab"), [1, [2, (3, 4)]], (), {"a": {1, 2}, (1, 2): frozenset({3})}, range(1, 9, 2),
    datetime.datetime(2024, 2, 29, 12, 30), datetime.date(2020, 1, 1), datetime.time(5, 6),
    datetime.timedelta(days=2, seconds=3), decimal.Decimal("1.10"), fractions.Fraction(2, 6),
    collections.deque([1, 2], maxlen=4),
])
def test_round_trip_keeps_value_and_type(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("value", [None, 0, -7, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 53, "", "a\"b\\",
                                   "über\n", "\ud800"])
def test_shortcut_for_common_values_writes_what_the_general_path_writes(value):
    from sweet_rl.evaluation import sandbox_values

    general = sandbox_values._COMPACT.encode(sandbox_values._encode(value, 0, [MAX_NODES]))
    assert encode(value) == general
    assert decode(encode(value)) == value


def test_subclasses_of_builtins_travel_as_their_base_value():
    ordered = collections.OrderedDict([("b", 1), ("a", 2)])
    assert decode(encode(ordered)) == {"a": 2, "b": 1}
    point = collections.namedtuple("Point", "x y")(1, 2)
    assert decode(encode(point)) == (1, 2)
    assert decode(encode(collections.Counter("aab"))) == {"a": 2, "b": 1}


def test_an_object_equal_to_everything_equals_nothing():
    class Anything:
        def __eq__(self, other):
            return True

    class SneakyInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    spoof = decode(encode(Anything()))
    assert isinstance(spoof, Opaque)
    assert not outputs_match(4, spoof) and not outputs_match(spoof, spoof)
    assert decode(encode(SneakyInt(0))) == 0 and not outputs_match(4, decode(encode(SneakyInt(0))))


def test_classes_compare_by_importable_name_only():
    assert outputs_match(decode(encode(int)), decode(encode(int)))
    assert not outputs_match(decode(encode(int)), decode(encode(str)))
    assert outputs_match(decode(encode([type(1.0)])), decode(encode([float])))
    local_class = type("Local", (), {})  # made by the code itself: not importable
    assert isinstance(decode(encode(local_class)), Opaque)


def test_pass_rule_matches_the_benchmark():
    assert outputs_match(1, 1.0) and outputs_match(True, 1)  # Python's own equality
    assert not outputs_match(None, None)  # a None reference never passes
    nan = decode(encode(float("nan")))
    assert math.isnan(nan) and not outputs_match(nan, decode(encode(float("nan"))))


def test_huge_or_deep_values_become_opaque_instead_of_hanging():
    deep = []
    for _ in range(500):
        deep = [deep]
    assert isinstance(decode(encode(deep)), Opaque)
    assert isinstance(decode(encode(list(range(MAX_NODES + 10)))), Opaque)
    cycle = []
    cycle.append(cycle)
    assert isinstance(decode(encode(cycle)), Opaque)


@pytest.mark.parametrize("text", ['{"zz": 1}', '{"l": 5}', '[1, 2]', 'not json',
                                  '{"d": [[{"l": []}, 1]]}'])
def test_malformed_wire_text_is_refused(text):
    with pytest.raises(DecodeError):
        decode(text)


def test_seccomp_program_jumps_land_on_the_right_returns():
    rows = seccomp_program("x86_64")
    allow, eperm, kill = len(rows) - 3, len(rows) - 2, len(rows) - 1
    assert rows[allow][3] == 0x7FFF0000 and rows[eperm][3] == 0x00050001 and rows[kill][3] == 0x80000000
    assert 1 + 1 + rows[1][2] == kill  # wrong architecture -> kill
    assert 3 + 1 + rows[3][1] == kill  # x32 syscall numbers -> kill
    refused = {}
    for index, (code, jt, jf, k) in enumerate(rows[4:allow], start=4):
        assert code == 0x15 and jf == 0 and index + 1 + jt == eperm
        refused[k] = True
    assert {57, 58, 56, 435, 62, 41} <= set(refused)  # fork, vfork, clone, clone3, kill, socket
    assert seccomp_program("riscv64") is None
