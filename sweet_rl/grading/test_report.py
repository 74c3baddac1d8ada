"""Short, readable texts of test outputs, for the ``test_results`` a graded row keeps.

A person reading a failed dialogue wants to see, per test, what the reference gave and what
the answer gave. The verdict is decided elsewhere (:mod:`~sweet_rl.grading.grader`); this
module only turns the two decoded outputs into text.

Decoded outputs are plain data rebuilt by :mod:`~sweet_rl.grading.decode`
(builtins and the grader's own stand-in classes), so writing them runs no code of the answer.
What the answer *returns* is still its choice, though: a list nested a thousand deep, a
string of forty megabytes, a set of two million items, an int of 400,000 bits (Python refuses
to write such an int in decimal, and the conversion is quadratic). ``repr`` walks a value
whole, and ``reprlib`` falls back to a whole ``repr`` for the types it has no method for
(``Counter``, dict views…). So the text is written here by a small writer that stops at a
character budget and a nesting limit: the work done is bounded by the budget, not by the
size of the value (a Decimal is written whole first, but the decoder caps its length), and
the result is at most ``MAX_CHARS`` characters.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
from typing import Dict, List

from sweet_rl.grading.compare import Comparison, NumpyArray, NumpyScalar, Opaque, TypeName

MAX_CHARS = 200  # characters of one expected/got text (and of the test expression kept)
MAX_LEVEL = 6  # containers deeper than this are written as "..."
MAX_INT_BITS = 640  # larger ints are described by size (about 190 decimal digits at most)
SORTED_SET_ITEMS = 64  # sets up to this size are written sorted, so the text is the same
# in every run (the grading process's string hashes are salted per run); larger ones are
# written in iteration order
ELLIPSIS = "..."
_IDENTITY = {"id1": " [identity check held] ", "id0": " [identity check failed] "}
_SCALAR_NAMES = {"b": "bool_", "i": "int", "u": "uint", "f": "float", "c": "complex"}
_DICT_VIEWS = {type({}.keys()): "dict_keys", type({}.items()): "dict_items",
               type({}.values()): "dict_values"}


class _Full(Exception):
    """The budget is spent: stop writing."""


class _Writer:
    def __init__(self, budget: int):
        self.parts: List[str] = []
        self.left = budget

    def add(self, text: str) -> None:
        if len(text) > self.left:
            self.parts.append(text[: self.left])
            self.left = 0
            raise _Full
        self.parts.append(text)
        self.left -= len(text)


def cut(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` ending in ``...`` when it is longer than ``limit`` characters."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - len(ELLIPSIS)] + ELLIPSIS


def short_repr(value: object, limit: int = MAX_CHARS) -> str:
    """A repr-like text of a decoded output, at most ``limit`` characters, made in time
    bounded by ``limit``. Never raises: what cannot be written is named instead."""
    kind = type(value)  # the commonest outputs first: the text the writer would give
    if kind is str:
        return cut(repr(value[:limit + 2])[:limit + 1], limit)
    if (kind is int and value.bit_length() <= MAX_INT_BITS) or kind is float or kind is bool \
            or value is None:
        return cut(repr(value)[:limit + 1], limit)
    writer = _Writer(limit + 1)  # one more than shown, to know whether it was cut
    try:
        _write(value, writer, 0)
    except _Full:
        pass
    except BaseException as error:  # noqa: BLE001 - a text must never stop a grading run
        return cut(f"<not shown: {type(error).__name__}>", limit)
    return cut("".join(writer.parts), limit)


def _write_int(value: int, out: _Writer) -> None:
    if value.bit_length() > MAX_INT_BITS:
        out.add(f"<int of {value.bit_length()} bits>")
    else:
        out.add(int.__repr__(value))


def _items(opening: str, items, closing: str, out: _Writer, depth: int, pairs=False) -> None:
    out.add(opening)
    for index, item in enumerate(items):
        if index:
            out.add(", ")
        if pairs:
            _write(item[0], out, depth + 1)
            out.add(": ")
            _write(item[1], out, depth + 1)
        else:
            _write(item, out, depth + 1)
    out.add(closing)


_SCALARS = (type(None), bool, int, float, complex, str, bytes, decimal.Decimal,
            fractions.Fraction, datetime.datetime, datetime.date, datetime.time,
            datetime.timedelta, NumpyScalar)


def _simple(item) -> bool:
    """A scalar, or a short tuple of scalars: cheap to write in full, so cheap to sort by."""
    if type(item) is tuple:
        return len(item) <= 8 and all(type(part) in _SCALARS for part in item)
    return type(item) in _SCALARS


def _set_items(value):
    """A set's items: as sorted texts when the set is small and its items simple (each item
    written once, within the budget), else as they come (never copied: it may be huge)."""
    if len(value) > SORTED_SET_ITEMS or not all(_simple(item) for item in value):
        return iter(value)
    return sorted(_Text(short_repr(item)) for item in value)


class _Text(str):
    """An item already written (a sorted set's item)."""


def _write(value: object, out: _Writer, depth: int) -> None:
    kind = type(value)
    if kind is _Text:
        out.add(str(value))
    elif value is None or kind is bool or kind is float or kind is complex:
        out.add(repr(value))
    elif kind is int:
        _write_int(value, out)
    elif kind is str:
        out.add(repr(value[: out.left + 1]))
    elif kind is bytes or kind is bytearray:
        text = repr(bytes(value[: out.left + 1]))
        out.add(text if kind is bytes else f"bytearray({text})")
    elif isinstance(value, (list, tuple, set, frozenset, dict, collections.deque,
                            NumpyArray, Comparison)) or kind in _DICT_VIEWS:
        _write_container(value, out, depth)
    elif kind is range:
        out.add("range(")
        _items("", (value.start, value.stop, value.step), "", out, depth)
        out.add(")")
    elif kind is fractions.Fraction:
        _items("Fraction(", (value.numerator, value.denominator), ")", out, depth)
    elif kind is decimal.Decimal:
        out.add(f"Decimal('{str(value)[: out.left + 1]}')")
    elif kind in (datetime.datetime, datetime.date, datetime.time, datetime.timedelta):
        out.add(repr(value))
    elif kind is Opaque:
        out.add(f"<opaque {str(value.type_name)[: out.left + 1]}>")
    elif kind is TypeName:
        out.add(f"<class {str(value.name)[: out.left + 1]}>")
    else:
        out.add(f"<{kind.__name__}>")


def _write_container(value, out: _Writer, depth: int) -> None:
    kind = type(value)
    if depth >= MAX_LEVEL:
        out.add(ELLIPSIS)
    elif kind is list:
        _items("[", value, "]", out, depth)
    elif kind is tuple:
        _items("(", value, ",)" if len(value) == 1 else ")", out, depth)
    elif kind is set:
        if value:
            _items("{", _set_items(value), "}", out, depth)
        else:
            out.add("set()")
    elif kind is frozenset:
        _items("frozenset({", _set_items(value), "})", out, depth)
    elif kind is collections.deque:
        _items("deque([", value, "])", out, depth)
    elif kind is collections.Counter or kind is collections.OrderedDict:
        _items(f"{kind.__name__}({{", dict.items(value), "})", out, depth, pairs=True)
    elif kind is dict:
        _items("{", value.items(), "}", out, depth, pairs=True)
    elif kind in _DICT_VIEWS:
        _items(f"{_DICT_VIEWS[kind]}([", value, "])", out, depth)
    elif kind is NumpyScalar:
        bits = str(8 * value.size) if value.size else ""  # np.float32, np.complex64
        out.add(f"np.{_SCALAR_NAMES.get(value.kind, value.kind)}{bits}(")
        _write(value.value, out, depth + 1)
        out.add(")")
    elif kind is NumpyArray:
        shape = value.shape
        if len(shape) == 1:
            _items("array([", value.items, "])", out, depth)
        else:
            _items(f"array(shape={shape}, flat=[", value.items, "])", out, depth)
    elif kind is Comparison:  # a comparing test's operands, with its operators between them
        for index, operand in enumerate(value.operands):
            if index:
                code = value.codes[index - 1]
                out.add(_IDENTITY.get(code, f" {code} "))
            _write(operand, out, depth + 1)
    else:
        out.add(f"<{kind.__name__}>")


def status_text(status: str, detail: object, whose: str) -> str:
    """What stands in for an output that did not come back: ``error: NameError``,
    ``timeout``, ``crash``… (``whose`` is ``reference`` or empty for the answer)."""
    text = f"{status}: {detail}" if status == "error" else status
    return cut(f"{whose} {text}" if whose else text)


def result_entry(test: str, passed: bool, expected: str, got: str) -> Dict[str, object]:
    """One entry of a row's ``test_results`` (texts already bounded)."""
    return {"test": cut(test), "passed": bool(passed), "expected": expected, "got": got}
