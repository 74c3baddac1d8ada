"""A safe wire format for the values that sandboxed code returns.

The sandboxed child turns each test output into JSON made only of plain values and small
tagged objects; the grading process turns that JSON back into builtin Python values and
compares them there. Whatever the answer returned, what reaches the comparison is a tree of
``None``/``bool``/``int``/``float``/``complex``/``str``/``bytes``/``list``/``tuple``/``dict``/
``set``/``frozenset`` — so no method of the answer's own objects ever runs in the grader, and
an object whose ``__eq__`` always says True is just an opaque value that equals nothing.

Rules, chosen to keep the benchmark's ``reference == answer`` verdicts:

- instances of subclasses of builtin containers and numbers (``OrderedDict``, ``Counter``,
  named tuples, ``numpy.float64`` …) travel as their builtin base value, which is how they
  compare against builtins anyway;
- a few stdlib value types travel as their state and are rebuilt as the real type in the
  grader (``datetime``'s four types, ``Decimal``, ``Fraction``, ``deque``); numpy scalars
  travel as the Python number they hold (``np.int64(3) == 3`` in numpy, too);
- classes travel as their importable name (``type(x)`` answers compare by name); classes the
  code defined itself do not, as in the original each exec makes a different class;
- anything else (class instances, functions, generators, numpy arrays) becomes an opaque token
  that compares unequal to everything, itself included, as a fresh object in the original
  would for a class without ``__eq__``;
- trees deeper than ``MAX_DEPTH`` or larger than ``MAX_NODES`` become a "too large" token,
  which is opaque too.

This module is stdlib-only: the sandbox worker loads it by file path, outside the package.
"""

from __future__ import annotations

import builtins
import json
import sys

MAX_DEPTH = 64
MAX_NODES = 200_000
_SMALL_INT = 2 ** 53  # larger ints travel as hex text (str(int) is capped at 4300 digits)


# one compact encoder for every value: json.dumps with separators would build a new one each call
_COMPACT = json.JSONEncoder(separators=(",", ":"))
json_string = json.encoder.encode_basestring_ascii  # a JSON string literal, as json.dumps writes it


class TooLarge(Exception):
    pass


def encode(value: object) -> str:
    """JSON text for ``value`` (runs in the sandboxed child)."""
    # the commonest outputs, written directly: the same text the general path gives
    kind = type(value)
    if kind is int and -_SMALL_INT < value < _SMALL_INT:
        return int.__repr__(value)
    if kind is str:
        return '{"s":' + json_string(value) + "}"
    if value is None:
        return "null"
    budget = [MAX_NODES]
    try:
        tree = _encode(value, 0, budget)
    except (TooLarge, RecursionError, MemoryError):
        tree = {"o": "<too large>"}
    return _COMPACT.encode(tree)


def _encode(value: object, depth: int, budget: list) -> object:
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise TooLarge()
    # bool first: it is an int subclass
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        number = int.__index__(value)
        return number if -_SMALL_INT < number < _SMALL_INT else {"ih": hex(number)}
    if isinstance(value, float):
        return {"f": float.__repr__(float(float.__float__(value)))}
    if isinstance(value, complex):
        number = complex.__complex__(value) if type(value) is not complex else value
        return {"c": [repr(number.real), repr(number.imag)]}
    if isinstance(value, str):
        return {"s": str.__str__(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"b": bytes(value).hex(), "mutable": isinstance(value, bytearray)}
    if isinstance(value, tuple):
        return {"t": [_encode(item, depth + 1, budget) for item in tuple.__iter__(value)]}
    if isinstance(value, list):
        return {"l": [_encode(item, depth + 1, budget) for item in list.__iter__(value)]}
    if isinstance(value, dict):
        return {"d": [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)]
                      for k, v in dict.items(value)]}
    if isinstance(value, frozenset):
        return {"fs": [_encode(item, depth + 1, budget) for item in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"st": [_encode(item, depth + 1, budget) for item in set.__iter__(value)]}
    if isinstance(value, range):
        return {"r": [value.start, value.stop, value.step]}
    if isinstance(value, type):
        name = _importable_name(value)
        return {"ty": name} if name else {"o": "class"}
    return _encode_library_value(value, depth, budget)


def _importable_name(cls: type) -> str:
    """``module.qualname`` when that name really leads to ``cls`` (not a class of the code)."""
    module_name, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str):
        return ""
    module = builtins if module_name == "builtins" else sys.modules.get(module_name)
    target = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return f"{module_name}.{qualname}" if target is cls else ""


def _encode_library_value(value: object, depth: int, budget: list) -> object:
    module = type(value).__module__
    name = type(value).__name__
    if module == "datetime" and name in ("datetime", "date", "time"):
        return {"dt": name, "iso": value.isoformat()}
    if module == "datetime" and name == "timedelta":
        return {"td": [value.days, value.seconds, value.microseconds]}
    if module in ("decimal", "_decimal", "_pydecimal") and name == "Decimal":
        return {"dec": str(value)}
    if module == "fractions" and name == "Fraction":
        return {"fr": [str(value.numerator), str(value.denominator)]}
    if module == "collections" and name == "deque":
        return {"dq": [_encode(item, depth + 1, budget) for item in list(value)], "maxlen": value.maxlen}
    if module == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
        return _encode(value.item(), depth + 1, budget)  # a numpy scalar
    return {"o": type(value).__qualname__}


class Opaque:
    """A value the grader cannot compare: equal to nothing, not even itself."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        return True

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"<opaque {self.type_name}>"


class DecodeError(ValueError):
    pass


def decode(text: str) -> object:
    """Builtin Python value from :func:`encode`'s JSON (runs in the grading process)."""
    try:
        return _decode(json.loads(text), 0)
    except (ValueError, TypeError, KeyError, IndexError, RecursionError) as error:
        raise DecodeError(f"malformed sandbox value: {error}") from None


def _decode(tree: object, depth: int) -> object:
    if depth > MAX_DEPTH + 1:
        raise DecodeError("too deep")
    if tree is None or isinstance(tree, (bool, int)):
        return tree
    if not isinstance(tree, dict) or len(tree) not in (1, 2):
        raise DecodeError(f"unexpected node {type(tree).__name__}")
    tag, body = next(iter(tree.items()))
    if tag in _LIBRARY_DECODERS:
        return _LIBRARY_DECODERS[tag](tree, depth)
    if tag == "s" and isinstance(body, str):
        return body
    if tag == "f":
        return float(body)
    if tag == "ih":
        return int(body, 16)
    if tag == "c":
        return complex(float(body[0]), float(body[1]))
    if tag == "b":
        data = bytes.fromhex(body)
        return bytearray(data) if tree.get("mutable") else data
    if tag == "r":
        return range(int(body[0]), int(body[1]), int(body[2]))
    if tag == "o":
        return Opaque(str(body))
    items = [_decode(item, depth + 1) for item in body] if tag != "d" else None
    if tag == "l":
        return items
    if tag == "t":
        return tuple(items)
    if tag == "st":
        return set(items)
    if tag == "fs":
        return frozenset(items)
    if tag == "d":
        return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in body}
    raise DecodeError(f"unknown tag {tag!r}")


class TypeName:
    """A class, known by its importable name; equal to the same name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, TypeName) and other.name == self.name

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"<class {self.name}>"


def _decode_datetime(tree: dict, depth: int) -> object:
    import datetime

    kind = {"datetime": datetime.datetime, "date": datetime.date, "time": datetime.time}[tree["dt"]]
    return kind.fromisoformat(str(tree["iso"]))


def _decode_timedelta(tree: dict, depth: int) -> object:
    import datetime

    days, seconds, micro = (int(v) for v in tree["td"])
    return datetime.timedelta(days=days, seconds=seconds, microseconds=micro)


def _decode_decimal(tree: dict, depth: int) -> object:
    import decimal

    return decimal.Decimal(str(tree["dec"]))


def _decode_fraction(tree: dict, depth: int) -> object:
    import fractions

    return fractions.Fraction(int(tree["fr"][0]), int(tree["fr"][1]))


def _decode_deque(tree: dict, depth: int) -> object:
    import collections

    maxlen = tree.get("maxlen")
    return collections.deque([_decode(item, depth + 1) for item in tree["dq"]],
                             None if maxlen is None else int(maxlen))


_LIBRARY_DECODERS = {
    "dt": _decode_datetime, "td": _decode_timedelta, "dec": _decode_decimal,
    "fr": _decode_fraction, "dq": _decode_deque,
    "ty": lambda tree, depth: TypeName(str(tree["ty"])),
}


def outputs_match(reference: object, answer: object) -> bool:
    """The benchmark's pass rule on decoded values: equal, and the reference is not None."""
    if reference is None:
        return False
    try:
        return bool(reference == answer)
    except (RecursionError, TypeError, ValueError):
        return False

