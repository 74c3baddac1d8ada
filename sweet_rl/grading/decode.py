"""Rebuild test outputs from the wire format of :mod:`.sandbox.sandbox_values` (grading process).

The result is made of builtins, ``OrderedDict``/``Counter``/``deque``, real dict views,
``datetime``/``Decimal``/``Fraction`` values and the classes of :mod:`.compare`, so that
``reference == answer`` runs only code of Python and of this package. The text is untrusted
(an answer may write anything its child can write), so decoding checks what it reads and
bounds what comparing the result may cost:

- a flat loop with an explicit stack (no recursion), at most ``MAX_DEPTH`` containers deep
  and ``MAX_NODES`` values;
- sets and dict keys with many equal hashes are refused: each one would cost a comparison
  with all the others, in building and in comparing (a quadratic stall of the grader);
- ``Counter`` inside ``Counter`` at most ``MAX_COUNTER_NESTING`` deep (``Counter.__eq__``
  compares every key twice, so nested Counters cost two to the power of their depth) and
  arrays inside object arrays at most ``MAX_ARRAY_NESTING`` deep.

Anything wrong raises :class:`DecodeError`, never another exception.
"""

from __future__ import annotations

import array
import binascii
import collections
import datetime
import decimal
import fractions
import json
import math

from sweet_rl.grading.compare import (_OPERATORS, MAX_DIMENSIONS, Comparison, NumpyArray,
                                      NumpyScalar, Opaque, TypeName)
from sweet_rl.grading.sandbox.sandbox_values import (MAX_BYTES, MAX_DEPTH, MAX_INT_HEX, MAX_NODES,
                                                NAN_SINGLETONS)

MAX_COUNTER_NESTING = 4
MAX_ARRAY_NESTING = 16
MAX_HASH_REPEATS = 32
# one object per module NaN singleton, so identity between two decoded outputs holds
_NAN_OBJECTS = {name: math.nan if name == "math" else float("nan") for name, _, _ in NAN_SINGLETONS}


class DecodeError(ValueError):
    pass


def decode(text: str) -> object:
    """The value that :func:`sandbox_values.encode` described."""
    if not isinstance(text, str) or len(text) > MAX_BYTES + 64:
        raise DecodeError("not a wire text, or longer than the encoder writes")
    try:
        tokens = _DECODER.decode(text)
        kind = type(tokens)
        # the commonest outputs, a number or a string, are their own token
        if kind is int or kind is float or kind is bool or tokens is None:
            return tokens
        if kind is str and tokens[:1] == "'":
            return tokens[1:]
        return _decode_tokens(tokens if kind is list else [tokens])
    except DecodeError:
        raise
    except Exception as error:  # noqa: BLE001 - malformed text of any kind
        raise DecodeError(
            f"malformed sandbox value: {type(error).__name__}: {error}"[:300]
        ) from None


def _no_constant(name):
    raise DecodeError(f"bare {name} is not part of the wire format")


# one decoder for every output: json.loads with an argument would build a new one each call
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _number(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise DecodeError(f"bad count {text[:20]!r}")
    return int(text)


def _hashed(keys: list) -> list:
    """``keys``, after checking that few of them share a hash (see the module docstring)."""
    if len(keys) > MAX_HASH_REPEATS and len(keys) - len(set(map(hash, keys))) > MAX_HASH_REPEATS:
        raise DecodeError("too many keys with equal hashes")
    return keys


def _pairs(items: list):
    return zip(_hashed(items[0::2]), items[1::2])


def _counter(items: list) -> collections.Counter:
    counter = collections.Counter()
    dict.update(counter, _pairs(items))  # as they were: Counter's own update would add up
    return counter


# tag -> (build from the items, values per counted item)
_BUILDERS = {
    "l": (lambda items: items, 1),
    "t": (tuple, 1),
    "s": (lambda items: set(_hashed(items)), 1),
    "z": (lambda items: frozenset(_hashed(items)), 1),
    "d": (lambda items: dict(_pairs(items)), 2),
    "o": (lambda items: collections.OrderedDict(_pairs(items)), 2),
    "C": (_counter, 2),
    "k": (lambda items: dict.fromkeys(_hashed(items)).keys(), 1),
    "i": (lambda items: dict(_pairs(items)).items(), 2),
    "v": (lambda items: dict(enumerate(items)).values(), 1),
}


def _header(token: str, tag: str):
    """``(build, number of values that follow)`` of a container's header token."""
    if tag == "a":
        kind, dims = token[1:2], token[2:]
        if kind not in tuple("biufcUSO"):
            raise DecodeError(f"bad array kind {kind!r}")
        size, colon, rest = dims.partition(":")
        size, dims = (_size(kind, size), rest) if colon else (None, dims)
        shape = tuple(_number(d) for d in dims.split(",")) if dims else ()
        if len(shape) > MAX_DIMENSIONS or math.prod(shape) > MAX_NODES:
            raise DecodeError("bad array shape")
        return (lambda items: NumpyArray(kind, shape, items, size)), math.prod(shape)
    if tag == "g":
        kind, size = token[1:2], token[2:]
        if kind not in ("b", "i", "u", "f", "c"):
            raise DecodeError(f"bad numpy scalar kind {kind!r}")
        size = _size(kind, size) if size else None
        return (lambda items: NumpyScalar(kind, items[0], size)), 1
    if tag == "q":
        count, _, maxlen = token[1:].partition(",")
        limit = _number(maxlen) if maxlen else None
        return (lambda items: collections.deque(items, limit)), _number(count)
    if tag == "?":
        codes = token[1:].split(",")
        if not all(code in _OPERATORS for code in codes):
            raise DecodeError("unknown comparison operator")
        return (lambda items: Comparison(codes, items)), len(codes) + 1
    build, per_item = _BUILDERS[tag]
    return build, per_item * _number(token[1:])


def _size(kind: str, text: str) -> int:
    """The bytes per item of a narrower floating type (float16, float32, complex64)."""
    size = _number(text)
    if (kind, size) not in (("f", 2), ("f", 4), ("c", 8)):
        raise DecodeError(f"bad item size {text!r} for kind {kind!r}")
    return size


def _unpack(token: str) -> list:
    """The values of a packed ``pd``/``pq`` token."""
    code = {"pd": "d", "pq": "q"}[token[:2]]
    values = array.array(code)
    values.frombytes(binascii.a2b_base64(token[2:]))
    if not values:
        raise DecodeError("empty packed run")
    return values.tolist()


def _float(token: str) -> float:
    what = token[1:]
    if what == "nan":
        return float("nan")  # made by computation: a fresh object, equal to nothing
    if what.startswith("nan:"):
        return _NAN_OBJECTS[what[4:]]
    return {"inf": math.inf, "-inf": -math.inf}[what]


def _big_int(text: str) -> int:
    if len(text) > MAX_INT_HEX + 3:
        raise DecodeError("int too large")
    return int(text, 16)


def _complex(token: str) -> complex:
    real, imag = token[1:].split(",")
    return complex(float(real), float(imag))


def _range(token: str) -> range:
    start, stop, step = (_big_int(part) for part in token[1:].split(","))
    return range(start, stop, step)


_DATETIME_KINDS = {"datetime": datetime.datetime, "date": datetime.date, "time": datetime.time}


def _datetime(token: str):
    kind, iso = token[1:].split(",", 1)
    return _DATETIME_KINDS[kind].fromisoformat(iso)


def _timedelta(token: str) -> datetime.timedelta:
    days, seconds, micro = (int(part) for part in token[1:].split(","))
    return datetime.timedelta(days=days, seconds=seconds, microseconds=micro)


def _decimal(token: str) -> decimal.Decimal:
    if len(token) > MAX_INT_HEX + 1:
        raise DecodeError("decimal too long")
    return decimal.Decimal(token[1:])


def _fraction(token: str) -> fractions.Fraction:
    """A Fraction rebuilt from its two fields as they are.

    The child sends a real Fraction's own fields, which are in lowest terms already;
    ``Fraction(n, d)`` would run a gcd on them here, quadratic in their size (seconds per
    value for 400,000-bit fields an answer can set by hand). A pair that is not in lowest
    terms can only come from such an answer, and simply compares unequal to the reference.
    """
    numerator, denominator = (_big_int(part) for part in token[1:].split("/"))
    if denominator < 1:
        raise DecodeError("fraction with a denominator below 1")
    value = object.__new__(fractions.Fraction)
    value._numerator, value._denominator = numerator, denominator
    return value


_SCALARS = {
    "f": _float, "I": lambda token: _big_int(token[1:]), "c": _complex,
    "b": lambda token: bytes.fromhex(token[1:]), "B": lambda token: bytearray.fromhex(token[1:]),
    "r": _range, "D": _datetime, "T": _timedelta, "M": _decimal, "F": _fraction,
    "y": lambda token: TypeName(token[1:]), "x": lambda token: Opaque(token[1:]),
    "X": lambda token: Opaque("too large"),
}
_HEADER_TAGS = frozenset(_BUILDERS) | {"a", "g", "q", "?"}


def _decode_tokens(tokens: list) -> object:
    frames = []  # [build, values expected, values so far, tag] per open container
    nesting = {"C": 0, "a": 0}
    index, total = 0, len(tokens)
    unpacked = 0  # values that came in packed runs
    if total > MAX_NODES + 1:
        raise DecodeError("too many values")
    while True:
        if index >= total:
            raise DecodeError("truncated")
        token = tokens[index]
        index += 1
        kind = type(token)
        if kind is str:
            tag = token[:1]
            if tag == "'":
                value = token[1:]
            elif tag in _HEADER_TAGS:
                if tag == "?" and index != 1:
                    raise DecodeError("a comparison chain can only be the whole output")
                build, count = _header(token, tag)
                if count > MAX_NODES:
                    raise DecodeError("too many values")
                if count:
                    if len(frames) > MAX_DEPTH:
                        raise DecodeError("too deep")
                    if tag in nesting:
                        nesting[tag] += 1
                        if nesting["C"] > MAX_COUNTER_NESTING or nesting["a"] > MAX_ARRAY_NESTING:
                            raise DecodeError("Counters or arrays nested too deep")
                    frames.append([build, count, [], tag])
                    continue
                value = build([])
            elif tag == "p":  # a run of items: all but the last go straight in
                values = _unpack(token)
                unpacked += len(values)
                if (
                    not frames
                    or len(frames[-1][2]) + len(values) > frames[-1][1]
                    or unpacked > MAX_NODES
                ):
                    raise DecodeError("packed run outside its container")
                frames[-1][2].extend(values[:-1])
                value = values[-1]
            elif tag in _SCALARS:
                value = _SCALARS[tag](token)
            else:
                raise DecodeError(f"unknown tag {tag!r}")
        elif kind is int or kind is float or kind is bool or token is None:
            value = token
        elif kind is list and token and set(map(type, token)) == {str}:
            unpacked += len(token)  # a run of strings, as in a "p" token
            if (
                not frames
                or len(frames[-1][2]) + len(token) > frames[-1][1]
                or unpacked > MAX_NODES
            ):
                raise DecodeError("packed run outside its container")
            frames[-1][2].extend(token[:-1])
            value = token[-1]
        else:
            raise DecodeError(f"unexpected {kind.__name__} token")
        while frames:  # hand the value to its container; close every container it completes
            frame = frames[-1]
            items = frame[2]
            items.append(value)
            if len(items) < frame[1]:
                break
            frames.pop()
            if frame[3] in nesting:
                nesting[frame[3]] -= 1
            value = frame[0](items)
        else:
            if index != total:
                raise DecodeError("values after the end")
            return value
