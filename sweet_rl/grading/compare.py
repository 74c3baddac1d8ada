"""Grader-side values that builtins cannot stand for, and the pass rule of a test.

The benchmark's verdict is ``reference_output == answer_output and reference_output is not
None``, with the reference on the left, and a ValueError raised by it means "not passed". The
grader applies that same expression to decoded values (:mod:`.decode`): builtins, the
real ``OrderedDict``/``Counter``/``deque``/dict views, and the classes below, whose methods are
ours — so Python's own rules (reflected ``__eq__``, identity first inside containers, the truth
value of each element comparison) decide, and nothing of the answer runs here.

- :class:`NumpyArray` stands for a numpy array without numpy: its comparisons give an
  element-wise :class:`NumpyArray` of booleans after broadcasting (lists, tuples and numbers
  convert as numpy converts them), whose truth value is its element when it has exactly one,
  and a ValueError otherwise — so ``np.array([3])`` equals ``3`` and ``[3]``, while two equal
  arrays of two elements fail, as in the original. Shapes that cannot broadcast and ragged
  lists raise ValueError, as numpy 2 does. :class:`NumpyScalar` is a numpy scalar: a number
  that broadcasts against sequences, and is hashable.
- A Python number compared with a numpy value is converted to the numpy value's type first,
  as numpy 2 does (NEP 50: Python scalars are "weak"): ``np.float32(0.1) == 0.1`` holds (both
  rounded to float32), and an int64 compares with a Python float in float64. Lists of Python
  numbers are not weak (numpy makes a float64 array of them), and neither are numpy values.
- :class:`Opaque` (a value the grader cannot see into) equals nothing, itself included.
- :class:`TypeName` is an importable class, equal to the same name.
- :class:`Comparison` is a test expression's top-level comparison whose operands the child
  sent back (strict rules); :func:`resolve` applies its operators here.
"""

from __future__ import annotations

import itertools
import math
import operator
import struct
import sys
from collections import deque
from sweet_rl.grading.sandbox.sandbox_values import MAX_DEPTH, MAX_NODES

MAX_DIMENSIONS = 64  # numpy's own limit (numpy 2)
# comparing values nested MAX_DEPTH deep takes a few C-level recursions per level
RECURSION_ROOM = 6 * MAX_DEPTH + 2000
_SEQUENCES = (list, tuple, range, deque)  # what numpy converts into array dimensions
# numpy's floating types narrower than a Python float, as (dtype kind, bytes per item): the
# struct code of their component type (float16 "e", float32 "f"; complex64 is two float32)
_NARROW = {("f", 2): "e", ("f", 4): "f", ("c", 8): "f"}
_PYTHON_NUMBERS = (bool, int, float, complex)


def _narrowed(value: float, code: str) -> float:
    """``value`` as a float of the narrower type holds it (rounded to nearest; infinite where
    it overflows, as numpy converts it)."""
    try:
        return struct.unpack(code, struct.pack(code, value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _weak(kind: str, size, own, other):
    """``(own, other)`` ready to compare, where ``own`` is an element of a numpy value of dtype
    ``kind`` and ``size`` bytes and ``other`` a Python number (NEP 50): a float16/32 or
    complex64 value compares with the number rounded to its type, an integer one with a
    Python float or complex in that type (float64, complex128). Anything else as it is."""
    other_type = type(other)
    if other_type not in _PYTHON_NUMBERS or kind not in "biufc":
        return own, other
    code = _NARROW.get((kind, size))
    if code is not None:
        if other_type is complex:
            return own, complex(_narrowed(other.real, code), _narrowed(other.imag, code))
        return own, _narrowed(float(other), code)  # a huge int raises OverflowError, as in numpy
    if kind in "iu" and other_type is float:
        return float(own), other
    if kind in "iu" and other_type is complex:
        return complex(own), other
    return own, other


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


def _as_array(value, depth=0):
    """``(shape, flat items)`` of ``value`` as numpy would convert it for a comparison."""
    if isinstance(value, NumpyArray):
        return value.shape, value.items
    if not isinstance(value, _SEQUENCES):
        return (), [value]
    if depth >= MAX_DIMENSIONS or len(value) > MAX_NODES:
        raise ValueError("too many dimensions or elements to convert to an array")
    parts = [_as_array(item, depth + 1) for item in value]
    if not parts:
        return (0,), []
    shape = parts[0][0]
    if any(part[0] != shape for part in parts):
        raise ValueError("setting an array element with a sequence: inhomogeneous shape")
    return (len(parts),) + shape, [item for part in parts for item in part[1]]


def _broadcast(left: tuple, right: tuple) -> tuple:
    ndim = max(len(left), len(right))
    left, right = (1,) * (ndim - len(left)) + left, (1,) * (ndim - len(right)) + right
    shape = []
    for a, b in zip(left, right):
        if a != b and a != 1 and b != 1:
            raise ValueError("operands could not be broadcast together")
        shape.append(b if a == 1 else a)
    return tuple(shape)


def _pairs(shape, left_shape, left, right_shape, right):
    """Element pairs of two broadcast operands, in the C order of the result."""
    if left_shape == right_shape:
        return zip(left, right)
    if len(left) == 1:
        return ((left[0], item) for item in right)
    if len(right) == 1:
        return ((item, right[0]) for item in left)

    def strides(own):
        own = (1,) * (len(shape) - len(own)) + own
        steps, step = [], 1
        for size in reversed(own):
            steps.append(0 if size == 1 else step)
            step *= size
        return steps[::-1]

    left_steps, right_steps = strides(left_shape), strides(right_shape)
    indices = itertools.product(*(range(size) for size in shape))
    return ((left[sum(map(operator.mul, index, left_steps))],
             right[sum(map(operator.mul, index, right_steps))]) for index in indices)


def _elementwise(op, left, right):
    left_shape, left_items = _as_array(left)
    right_shape, right_items = _as_array(right)
    # a Python number against a numpy value takes the numpy value's type (see _weak)
    if isinstance(left, NumpyArray) and type(right) in _PYTHON_NUMBERS:
        left_items, right_items = _weak_items(left, left_items, right)
    elif isinstance(right, NumpyArray) and type(left) in _PYTHON_NUMBERS:
        right_items, left_items = _weak_items(right, right_items, left)
    shape = _broadcast(left_shape, right_shape)
    if not shape:  # two scalars: numpy gives a numpy bool
        return bool(op(left_items[0], right_items[0]))
    if math.prod(shape) > MAX_NODES:
        raise ValueError("comparison result too large")
    items = [
        bool(op(a, b)) for a, b in _pairs(shape, left_shape, left_items, right_shape, right_items)
    ]
    return NumpyArray("b", shape, items)


def _weak_items(array, items, number):
    """``(items, [number])`` as :func:`_weak` makes them comparable."""
    pairs = [_weak(array.kind, array.size, item, number) for item in items]
    return [own for own, _ in pairs], [pairs[0][1] if pairs else number]


class NumpyArray:
    """A numpy array: dtype kind (``b``, ``i``, ``u``, ``f``, ``c``, ``U``, ``S``, ``O``),
    shape and elements in C order, compared element-wise as numpy does; ``size`` is the
    bytes per item of a floating type narrower than a Python float (float16, float32,
    complex64), else None."""

    __slots__ = ("kind", "shape", "items", "size")
    __hash__ = None  # arrays are unhashable

    def __init__(self, kind: str, shape: tuple, items: list, size=None):
        self.kind, self.shape, self.items, self.size = kind, tuple(shape), items, size

    def __bool__(self):
        if len(self.items) == 1:
            return bool(self.items[0])
        raise ValueError(
            f"the truth value of an array with {len(self.items)} elements is ambiguous"
        )

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __contains__(self, value):
        result = self == value
        return any(result.items) if isinstance(result, NumpyArray) else bool(result)

    def __eq__(self, other):
        return _elementwise(operator.eq, self, other)

    def __ne__(self, other):
        return _elementwise(operator.ne, self, other)

    def __lt__(self, other):
        return _elementwise(operator.lt, self, other)

    def __le__(self, other):
        return _elementwise(operator.le, self, other)

    def __gt__(self, other):
        return _elementwise(operator.gt, self, other)

    def __ge__(self, other):
        return _elementwise(operator.ge, self, other)

    def __repr__(self):
        return f"<array kind {self.kind} shape {self.shape}>"


class NumpyScalar(NumpyArray):
    """A numpy scalar (``np.float64``, ``np.int64``, ``np.bool_``…): compares as its number,
    except against sequences and arrays, which it broadcasts against; hashable."""

    __slots__ = ()

    def __init__(self, kind: str, value, size=None):
        super().__init__(kind, (), [value], size)

    @property
    def value(self):
        return self.items[0]

    def __hash__(self):
        return hash(self.items[0])

    def _compare(self, op, other):
        if isinstance(other, _SEQUENCES) or (isinstance(other, NumpyArray) and other.shape):
            return _elementwise(op, self, other)
        if isinstance(other, NumpyScalar):
            return op(self.items[0], other.items[0])
        return op(*_weak(self.kind, self.size, self.items[0], other))

    def __eq__(self, other):
        return self._compare(operator.eq, other)

    def __ne__(self, other):
        return self._compare(operator.ne, other)

    def __lt__(self, other):
        return self._compare(operator.lt, other)

    def __le__(self, other):
        return self._compare(operator.le, other)

    def __gt__(self, other):
        return self._compare(operator.gt, other)

    def __ge__(self, other):
        return self._compare(operator.ge, other)

    def __repr__(self):
        return f"<numpy scalar {self.items[0]!r}>"


_OPERATORS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
              ">": operator.gt, ">=": operator.ge, "in": lambda a, b: a in b,
              "not in": lambda a, b: a not in b,
              "id1": lambda a, b: True, "id0": lambda a, b: False}  # identity, decided in the child


class Comparison:
    """``operand0 op0 operand1 op1 operand2 …`` with the operands' values."""

    __slots__ = ("codes", "operands")

    def __init__(self, codes: list, operands: list):
        self.codes, self.operands = codes, operands

    def evaluate(self):
        """What Python gives: each link in turn, stopping at the first false one (its truth
        value is taken, which may raise), else the last link's result as it is."""
        result = True
        last = len(self.codes) - 1
        for index, code in enumerate(self.codes):
            result = _OPERATORS[code](self.operands[index], self.operands[index + 1])
            if index < last and not result:
                return result
        return result


def resolve(value):
    """The test output: a comparison chain is evaluated, anything else is itself. May raise."""
    if type(value) is Comparison:
        with_room_for_depth()
        return value.evaluate()
    return value


def with_room_for_depth() -> None:
    """Let ``==`` recurse through values nested ``MAX_DEPTH`` deep (CPython 3.11 counts C
    recursion in comparisons against the recursion limit). Raised once, never lowered."""
    if sys.getrecursionlimit() < RECURSION_ROOM:
        sys.setrecursionlimit(RECURSION_ROOM)


def _passes(reference, answer) -> bool:
    # the published expression, in its order: the truth of == first (it may raise)
    return bool(reference == answer and reference is not None)


def verdict(reference, answer) -> str:
    """``pass``, ``fail`` or ``fail:<Exception>`` for two decoded, resolved outputs."""
    try:
        return "pass" if _passes(reference, answer) else "fail"
    except RecursionError:
        with_room_for_depth()  # only deep values need it: try once more with room
    except Exception as error:  # noqa: BLE001 - a comparison may raise anything; it fails the test
        return f"fail:{type(error).__name__}"
    try:
        return "pass" if _passes(reference, answer) else "fail"
    except Exception as error:  # noqa: BLE001
        return f"fail:{type(error).__name__}"
