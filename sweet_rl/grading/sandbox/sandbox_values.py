"""The wire format of test outputs, and its encoder (runs in the sandboxed child).

A child never sends an object, only a description of it that the grading process rebuilds
from plain values (:mod:`~sweet_rl.grading.decode`) and compares there
(:mod:`~sweet_rl.grading.compare`), so no method of an answer's object ever runs
in the grader. The description is a *flat* stream of JSON tokens in pre-order: a container is
a header token holding its item count, followed by its items. Being flat, no step on either
side recurses with the depth of the value (``json.loads`` of nested JSON, a recursive encoder
or decoder would hit Python's recursion limit long before ``MAX_DEPTH``).

Tokens: JSON numbers, ``true``/``false``/``null`` are themselves (finite floats included);
JSON strings start with a tag character:

- ``'text`` a str; ``I<hex>`` an int beyond 2**53; ``f<what>`` a float that is not finite:
  ``finf``, ``f-inf``, ``fnan`` (a NaN made by computation: a fresh object) or ``fnan:<where>``
  for a module's NaN singleton (``math.nan``, ``numpy.nan``…), which the grader maps to one
  object per singleton: inside containers Python compares by identity first, so
  ``[math.nan] == [math.nan]`` holds where ``[float('nan')] == [float('nan')]`` does not;
- ``c<re>,<im>`` complex, ``b<hex>``/``B<hex>`` bytes/bytearray, ``r<start>,<stop>,<step>``
  range, ``D<kind>,<iso>`` datetime/date/time, ``T<days>,<s>,<us>`` timedelta, ``M<text>``
  Decimal, ``F<hex>/<hex>`` Fraction, ``y<module.qualname>`` an importable class,
  ``x<name>`` an opaque value (equal to nothing), ``X`` a value over the bounds below;
- headers: ``l<n>`` list, ``t<n>`` tuple, ``s<n>`` set, ``z<n>`` frozenset, ``d<n>`` dict
  (n key/value pairs follow), ``o<n>`` OrderedDict, ``C<n>`` Counter, ``k<n>``/``i<n>``/
  ``v<n>`` the keys/items/values view of a dict, ``q<n>,<maxlen>`` deque,
  ``a<kind><d1,d2…>`` a numpy array of that dtype kind and shape (its elements follow in C
  order), ``g<kind>`` a numpy scalar (one element follows); for the floating types narrower
  than a Python float the kind carries the bytes per item, ``af4:<d1,d2…>`` and ``gf4``
  (float32; ``f2`` float16, ``c8`` complex64), which decide how a Python number compares
  with them (numpy 2 rounds the number to that type first); and, first and only at the top,
  ``?<op>,<op>…`` a comparison chain whose operands follow (strict rules' comparing tests);
- ``pd<base64>``/``pq<base64>``: many items of the enclosing container at once, as native
  doubles (finite ones only, so no NaN singleton is lost) or 64-bit ints; and a JSON array
  of strings: that many str items. Long lists and arrays of numbers or strings travel this
  way: writing two million floats one token at a time takes longer than an answer's time
  per test.

Instances of other subclasses of builtin types travel as their builtin base (as they compare
against builtins anyway; an answer's own ``__eq__`` is not kept); classes the code defined
itself, functions, generators and other objects become opaque tokens, which equal nothing, as
a fresh object of a class without ``__eq__`` would in the original.

Stdlib-only: the sandbox worker loads this file by path, outside the package.
"""

import array
import binascii
import itertools
import json
import sys

MAX_NODES = 2_500_000  # values in one output (a container counts as one, plus its items)
MAX_DEPTH = 1_024  # containers nested in one another
MAX_BYTES = 48 * 1024 * 1024  # characters of one encoded output
MAX_INT_HEX = 100_000  # hex digits of one int (comparing or rebuilding bigger ones costs time)
PACK_MIN = 256  # sequences at least this long of only floats or only ints travel packed
_SMALL_INT = 2 ** 53  # larger ints travel as hex text (str(int) is capped at 4300 digits)
_INF = float("inf")

# one compact encoder for every value: json.dumps with separators would build a new one each call
_COMPACT = json.JSONEncoder(separators=(",", ":"))
json_string = json.encoder.encode_basestring_ascii  # a JSON string literal, as json.dumps writes it
TOO_LARGE = json_string("X")

# module NaN singletons whose identity survives the trip: (token suffix, module, attribute)
NAN_SINGLETONS = (("math", "math", "nan"), ("numpy", "numpy", "nan"), ("cmath", "cmath", "nan"),
                  ("json", "json.decoder", "NaN"))
_DICT_VIEWS = (type({}.keys()), type({}.items()), type({}.values()))


class TooLarge(Exception):
    pass


def encode(value):
    """JSON text for one test output."""
    # the commonest outputs, written directly: the same text the general path gives
    kind = type(value)
    if kind is int and -_SMALL_INT < value < _SMALL_INT:
        return int.__repr__(value)
    if kind is str:
        return (
            json_string("'" + value)
            if len(value) < MAX_BYTES // 8
            else _encode_stream((value,), None)
        )
    if value is None:
        return "null"
    if kind is float and -_INF < value < _INF:
        return float.__repr__(value)  # what the JSON encoder writes for a float
    if kind is bool:
        return "true" if value else "false"
    return _encode_stream((value,), None)


def encode_comparison(codes, operands):
    """JSON text for a comparison chain: ``codes`` are the operators (``==``, ``in``… or
    ``id1``/``id0`` for an ``is``/``is not`` link decided in the child), then the operands."""
    return _encode_stream(operands, "?" + ",".join(codes))


def _encode_stream(roots, header):
    tokens = [] if header is None else [header]
    try:
        budget = [len(roots), 0]  # nodes committed, characters of text and bytes seen
        for root in roots:
            _flatten(root, tokens, budget)
        text = _COMPACT.encode(tokens[0] if len(tokens) == 1 else tokens)
    except (TooLarge, RecursionError, MemoryError, OverflowError):
        return TOO_LARGE
    return text if len(text) <= MAX_BYTES else TOO_LARGE


def _flatten(root, tokens, budget):
    """Append the tokens of ``root`` in pre-order, with an explicit stack of iterators."""
    append = tokens.append
    stack = [iter((root,))]
    while stack:
        for item in stack[-1]:
            kind = type(item)
            if kind is int:
                append(item if -_SMALL_INT < item < _SMALL_INT else _big_int(item))
            elif kind is str:
                budget[1] += len(item)
                if budget[1] > MAX_BYTES:
                    raise TooLarge()
                append("'" + item)
            elif kind is float:
                append(item if -_INF < item < _INF else _float_token(item))
            elif item is None or kind is bool:
                append(item)
            else:
                children = _open(item, append, budget)
                if children is not None:
                    if len(stack) > MAX_DEPTH:
                        raise TooLarge()
                    stack.append(children)
                    break
        else:
            stack.pop()


def _commit(budget, count):
    budget[0] += count
    if budget[0] > MAX_NODES:
        raise TooLarge()


def _big_int(number):
    text = hex(number)
    if len(text) > MAX_INT_HEX:
        raise TooLarge()
    return "I" + text


def _float_token(number):
    if number == number:
        return "finf" if number > 0 else "f-inf"
    for name, module_name, attribute in NAN_SINGLETONS:
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, attribute, None) is number:
            return "fnan:" + name
    return "fnan"


def _container(append, tag, count, budget, children):
    _commit(budget, count)
    append(tag + str(count))
    return children


def _open(item, append, budget):
    """Append the token of ``item``; for a container return an iterator over what follows
    its header (None for a leaf). Base-class methods are used on purpose: a subclass of the
    answer's cannot change what is read."""
    kind = type(item)
    if kind is list:
        return _sequence(append, "l", item, budget)
    if kind is tuple:
        return _sequence(append, "t", item, budget)
    if kind is dict:
        return _container(append, "d", len(item), budget, _pairs(item.items(), len(item), budget))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(item, (numpy.ndarray, numpy.generic)):
        children = _open_numpy(item, numpy, append, budget)
        if children is not False:
            return children
    if isinstance(item, int):  # bool itself cannot be subclassed: exact bools never get here
        number = int.__index__(item)
        append(number if -_SMALL_INT < number < _SMALL_INT else _big_int(number))
    elif isinstance(item, float):
        number = float.__float__(item)  # a new float: a subclass instance is no singleton
        append(
            number
            if -_INF < number < _INF
            else _float_token(number)
            if number == number
            else "fnan"
        )
    elif isinstance(item, str):
        text = str.__str__(item)
        budget[1] += len(text)
        if budget[1] > MAX_BYTES:
            raise TooLarge()
        append("'" + text)
    elif isinstance(item, complex):
        number = complex.__complex__(item) if kind is not complex else item
        append(f"c{number.real!r},{number.imag!r}")
    elif isinstance(item, (bytes, bytearray)):
        data = bytes(item)
        budget[1] += 2 * len(data)
        if budget[1] > MAX_BYTES:
            raise TooLarge()
        append(("B" if isinstance(item, bytearray) else "b") + data.hex())
    elif isinstance(item, (list, tuple)):
        return _sequence(append, "l" if isinstance(item, list) else "t", list(item), budget)
    elif isinstance(item, dict):
        return _open_dict(item, append, budget)
    elif isinstance(item, (set, frozenset)):
        tag, base = ("z", frozenset) if isinstance(item, frozenset) else ("s", set)
        return _container(append, tag, base.__len__(item), budget, base.__iter__(item))
    elif isinstance(item, _DICT_VIEWS):
        count = len(item)
        if isinstance(item, _DICT_VIEWS[1]):
            return _container(append, "i", count, budget, _pairs(iter(item), count, budget))
        tag = "k" if isinstance(item, _DICT_VIEWS[0]) else "v"
        return _container(append, tag, count, budget, iter(item))
    elif isinstance(item, range):
        append("r" + ",".join(hex(v) for v in (item.start, item.stop, item.step)))
    elif isinstance(item, type):
        name = _importable_name(item)
        append("y" + name if name else "xclass")
    else:
        return _open_library_value(item, append, budget)
    return None


def _sequence(append, tag, items, budget):
    packed = _packed(items, budget) if len(items) >= PACK_MIN else None
    if packed is None:
        return _container(append, tag, len(items), budget, iter(items))
    _container(append, tag, len(items), budget, None)
    append(packed)
    return None


def _packed(items, budget):
    """One token for all of ``items`` when they are all finite floats, all ints that fit 64
    bits or all strings, else None."""
    kinds = set(map(type, items))
    if kinds == {str}:
        budget[1] += sum(map(len, items))
        if budget[1] > MAX_BYTES:
            raise TooLarge()
        return list(items)
    if kinds == {float}:
        total = sum(items)
        if total - total != 0.0:  # an inf or a NaN among them (or an overflowing sum)
            return None
        data = array.array("d", items).tobytes()
    elif kinds == {int}:
        try:
            data = array.array("q", items).tobytes()
        except OverflowError:
            return None
    else:
        return None
    return ("pd" if kinds == {float} else "pq") + _base64(data)


def _base64(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _pairs(items, count, budget):
    """Keys and values of ``count`` pairs, one after the other."""
    _commit(budget, count)  # the header counted pairs; each pair is two values
    return itertools.chain.from_iterable(items)


def _open_dict(item, append, budget):
    collections = sys.modules.get("collections")
    count = dict.__len__(item)
    if collections is not None and isinstance(item, collections.OrderedDict):
        # the OrderedDict's own order (move_to_end changes it, not the dict's)
        items = collections.OrderedDict.items(item)
        return _container(append, "o", count, budget, _pairs(iter(items), count, budget))
    tag = "C" if collections is not None and isinstance(item, collections.Counter) else "d"
    return _container(append, tag, count, budget, _pairs(iter(dict.items(item)), count, budget))


def _open_numpy(item, numpy, append, budget):
    """Arrays and scalars of the numeric, text and object kinds; False when ``item`` is
    another kind of scalar, which then travels as its builtin base or opaque."""
    if isinstance(item, numpy.ndarray):
        kind = item.dtype.kind
        if kind not in "biufcUSO" or item.ndim > 64:
            append("xndarray")
            return None
        _commit(budget, int(item.size))
        size = _narrow_size(kind, item.dtype.itemsize)
        append("a" + kind + (size + ":" if size else "")
               + ",".join(str(int(d)) for d in item.shape))
        flat = numpy.asarray(item).ravel()
        # numbers that doubles or 64-bit ints hold exactly travel packed (not uint64)
        if flat.size >= PACK_MIN and kind in "fiu" and flat.itemsize <= (8 if kind != "u" else 4):
            code = "d" if kind == "f" else "q"
            append("p" + code + _base64(flat.astype(code).tobytes()))
            return None
        return iter(flat.tolist())
    kind = item.dtype.kind
    if kind not in "biufc":
        return False
    value = item.item()
    if type(value) not in (bool, int, float, complex):  # longdouble gives itself back
        value = complex(item) if kind == "c" else float(item)
    _commit(budget, 1)
    append("g" + kind + _narrow_size(kind, item.dtype.itemsize))
    return iter((value,))


def _narrow_size(kind, itemsize):
    """The bytes per item, as text, of float16, float32 and complex64; "" for other types."""
    return str(itemsize) if (kind, itemsize) in (("f", 2), ("f", 4), ("c", 8)) else ""


def _importable_name(cls):
    """``module.qualname`` when that name really leads to ``cls`` (not a class of the code)."""
    module_name, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str):
        return ""
    target = sys.modules.get(module_name)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return f"{module_name}.{qualname}" if target is cls else ""


def _open_library_value(value, append, budget):
    module, name = type(value).__module__, type(value).__name__
    if module == "datetime" and name in ("datetime", "date", "time"):
        append(f"D{name},{value.isoformat()}")
    elif module == "datetime" and name == "timedelta":
        append(f"T{value.days},{value.seconds},{value.microseconds}")
    elif module in ("decimal", "_decimal", "_pydecimal") and name == "Decimal":
        text = str(value)
        if len(text) > MAX_INT_HEX:
            raise TooLarge()
        append("M" + text)
    elif module == "fractions" and name == "Fraction":
        append(f"F{_big_int(value.numerator)[1:]}/{_big_int(value.denominator)[1:]}")
    elif module == "collections" and name == "deque":
        items = list(value)
        maxlen = "" if value.maxlen is None else str(value.maxlen)
        _commit(budget, len(items))
        append(f"q{len(items)},{maxlen}")
        return iter(items)
    else:
        append("x" + str(type(value).__qualname__)[:100])
    return None
