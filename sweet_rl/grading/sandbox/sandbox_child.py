"""What runs inside a confined sandbox child: the tests of one job, and their result packets.

Loaded by path by :mod:`sandbox_worker` (stdlib only). A child gets its job through its job
channel (a unix stream socket it may only read: no ``/proc/self/fd`` path reopens a socket,
as one would a pipe, for writing) after it was forked (see :mod:`sandbox_zygote`): first a
header (:func:`job_header`: the limits, the rules, the nonce, the answer), then one test
expression per line, each written by the worker only once the previous test's record has
arrived. Texts travel as JSON string literals, one per line, read with the C string scanner
alone: the whole JSON decoder's first use in a fresh child copies some 40 pages of the
worker. It sends, on an AF_UNIX SOCK_SEQPACKET socket
(``RESULT_FD``), one record per test as soon as it is known: ``[index, status, detail]`` with
status ``ok`` (detail: the value in the wire format of :mod:`sandbox_values`), ``error``
(detail: the exception's class name) or ``timeout``. Every packet starts with the job's
nonce: a packet the answer writes on that socket without it is refused by the worker, and the
kernel keeps each packet whole, so nothing written can be spliced into a record.

The answer runs in this process, so it can find the nonce in memory and send records in the
harness's name. That gains it nothing: a record carries only a value the answer could have
returned (the grading process compares it with the reference), the worker times each test
by the kernel from the previous record, and a test's input is not in this process before
that clock starts, so work done after sending a record early is charged to the next test.

Everything here is written with the fork in mind: each page of the worker that a child
writes to is copied for that child, and the copies are most of what a child costs. So what
every child needs is prepared once in the worker (the pristine builtins, the encoder), and
the per-test checks avoid touching objects they do not need.
"""

import _ast
import _json
import _queue
import builtins
import operator
import os
import signal
import sys
import time

from sandbox_values import encode, encode_comparison, json_string

RESULT_FD, JOB_FD = 3, 4
# the rule sets a job may name (the grading process's ``grader.RULES``; this file cannot
# import the package)
RULE_SETS = ("benchmark", "strict")
NONCE_LENGTH = 32  # hex characters of the per-job nonce that starts every packet
MAX_PACKET = 60000  # bytes of a record per packet (well under the socket's send buffer)
_monotonic = time.monotonic  # captured here: an answer rebinding time.monotonic changes nothing
_QUICK = frozenset((int, float, bool, str, type(None)))  # outputs encoded at once
_SHORT_TEXT = 65536  # characters of a string output that is encoded at once
_FLAT = frozenset((list, tuple, set, frozenset, dict))
_FLAT_ITEMS = 64  # entries of a flat container of quick values that is encoded at once
_ITEM_TEXT = 4096  # characters of each string in such a container


def _quick(value):
    """Whether ``value`` is encoded at once: a number, a short text, or a list, tuple, set or
    dict of at most ``_FLAT_ITEMS`` numbers and short texts. No encoding allowance is asked
    for those, so the worker is not woken for it. Exact types only: iterating them runs no
    code of the answer."""
    kind = type(value)
    if kind in _QUICK:
        return kind is not str or len(value) <= _SHORT_TEXT
    if kind not in _FLAT or len(value) > _FLAT_ITEMS:
        return False
    for items in ((value.keys(), value.values()) if kind is dict else (value,)):
        for item in items:
            kind = type(item)
            if kind not in _QUICK or (kind is str and len(item) > _ITEM_TEXT):
                return False
    return True


class _TestTimeout(BaseException):
    """Raised in the child by its interval timer when a test overruns (fast runs)."""


def on_alarm(signum, frame):
    raise _TestTimeout()


def dict_version_view(mapping):
    """A view of ``mapping``'s private version tag (its ``value`` reads the tag), or None
    where that is not possible.

    CPython (PEP 509) gives every dict a tag that changes whenever the dict does. Reading it
    touches no object; comparing the builtins value by value writes to the reference count
    of every builtin, which in a fresh child copies about 70 pages of the worker (measured:
    0.14 ms, a tenth of a bare child). The tag sits right after the object header and the
    item count; a probe checks that every kind of change moves it and nothing else does, so
    an interpreter with another layout falls back to the value-by-value check. The view is
    made once, in the worker: a child reads it without building an object per test.
    """
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes
    except ImportError:
        return None
    offset = 3 * ctypes.sizeof(ctypes.c_ssize_t)  # ob_refcnt, ob_type, ma_used

    def view(of):
        return ctypes.c_uint64.from_address(id(of) + offset)

    probe = {"kept": 1}
    tag = view(probe)
    seen = [tag.value, tag.value]
    probe["kept"] = 2
    seen.append(tag.value)
    probe["added"] = 3
    seen.append(tag.value)
    del probe["added"]
    seen.append(tag.value)
    probe.clear()
    seen.append(tag.value)
    return view(mapping) if seen[0] == seen[1] and len(set(seen)) == len(seen) - 1 else None


class BuiltinsGuard:
    """Puts the builtins back after a test that changed them (made once, in the worker).

    An answer that monkeypatches ``len``, ``int``, ``__import__``… changes only its own test
    this way, never how its output is encoded or what its next test sees.
    """

    def __init__(self):
        self.pristine = dict(builtins.__dict__)
        self._tag = dict_version_view(builtins.__dict__)
        self._version = self._current_version()

    def _current_version(self):
        return self._tag.value if self._tag is not None else None

    def unchanged(self):
        namespace, pristine = builtins.__dict__, self.pristine
        if self._tag is not None:
            return self._tag.value == self._version
        return (len(namespace) == len(pristine)
                and all(map(operator.is_, namespace.values(), pristine.values()))
                and all(map(operator.is_, namespace, pristine)))

    def restore(self):
        if self.unchanged():
            return
        namespace = builtins.__dict__
        namespace.clear()
        namespace.update(self.pristine)
        self._version = self._current_version()


BUILTINS = BuiltinsGuard()


def result_line(index, status, detail):
    """``[index, status, detail]`` as one JSON line, without building an encoder per test."""
    return f'[{int(index)}, {json_string(status)}, {json_string(str(detail))}]\n'


class _ImportOnUse(type(sys)):
    """A module name that imports the module on its first attribute use. ``multiprocessing``
    pulls in ``threading``, whose fork hook would run Python code in every child; only the
    rare answer that uses the name without importing it pays for the import."""

    def __getattr__(self, name):
        real = __import__(self.__name__)
        self.__dict__.update(real.__dict__)
        return getattr(real, name)


# The published grader calls ``exec(code)`` and ``eval(test)`` inside a function of its module
# sweet_rl/utils/code_utils.py: the code's globals are that module's globals and its locals
# are the function's locals. So its imports are usable without an import, ``__name__`` is the
# module's dotted name (an ``if __name__ == "__main__":`` block does not run), and the names
# ``function_definition`` and ``test_case`` are visible. The grader's own helper functions and
# text constants are left out: no answer can mean to call them. A fresh copy per test, so an
# answer's ``global`` statements cannot reach the next test (in the original they could).
BENCHMARK_GLOBALS = {
    "__name__": "sweet_rl.utils.code_utils", "__package__": "sweet_rl.utils", "__doc__": None,
    "__file__": "sweet_rl/utils/code_utils.py", "__loader__": None, "__spec__": None,
    "__builtins__": builtins.__dict__,
    "multiprocessing": _ImportOnUse("multiprocessing"), "signal": signal, "Empty": _queue.Empty,
}


class Compared:
    """A comparing test's operands, evaluated here, to be compared in the grader (strict)."""

    __slots__ = ("codes", "operands")

    def __init__(self, codes, operands):
        self.codes, self.operands = codes, operands


_OPERATOR_CODES = {_ast.Eq: "==", _ast.NotEq: "!=", _ast.Lt: "<", _ast.LtE: "<=", _ast.Gt: ">",
                   _ast.GtE: ">=", _ast.In: "in", _ast.NotIn: "not in", _ast.Is: "is",
                   _ast.IsNot: "is not"}


def _comparison(expression):
    """``(operator codes, compiled operands)`` when the test's top level is a comparison."""
    tree = compile(expression, "<test>", "eval", _ast.PyCF_ONLY_AST)
    if type(tree.body) is not _ast.Compare:
        return None
    operands = [tree.body.left] + list(tree.body.comparators)
    compiled = [compile(_ast.Expression(body=node), "<test>", "eval") for node in operands]
    return [_OPERATOR_CODES[type(op)] for op in tree.body.ops], compiled


def _run_test(compiled, code, expression, rules):
    if rules == "benchmark":
        scope_globals = BENCHMARK_GLOBALS.copy()
        scope_locals = {"function_definition": code, "test_case": expression}
        exec(compiled, scope_globals, scope_locals)
        # the original calls locals() again for eval: that puts the function's own locals back
        # and drops its unbound ones, ``e`` (of its ``except ... as e``) among them
        scope_locals["function_definition"], scope_locals["test_case"] = code, expression
        scope_locals.pop("e", None)
        return eval(expression, scope_globals, scope_locals)
    module = {"__name__": "__sandboxed__", "__builtins__": __builtins__}
    exec(compiled, module)
    comparison = _comparison(expression)
    if comparison is None:
        return eval(expression, module)
    # strict rules: a comparison's operators must not be the answer's methods; its operands
    # go to the grader, all evaluated left to right (identity is decided here: it cannot lie)
    ops, parts = comparison
    operands = [eval(part, module) for part in parts]
    codes = [("id1" if (operands[i] is operands[i + 1]) == (op == "is") else "id0")
             if op in ("is", "is not") else op for i, op in enumerate(ops)]
    return Compared(codes, operands)


def _encode_output(value):
    if type(value) is Compared:
        return encode_comparison(value.codes, value.operands)
    return encode(value)


def send_packet(fd, data):
    """One packet on the result socket (SOCK_SEQPACKET: the kernel keeps it whole)."""
    os.write(fd, data)


def record_packets(nonce, index, status, detail):
    """The packets of one result: ``nonce + b" " + [index, status, detail]`` as JSON, or for a
    large one its head in ``nonce + b"+" + part`` packets and the last part after ``b" "``."""
    body = result_line(index, status, detail).encode()
    last = max(0, (len(body) - 1) // MAX_PACKET * MAX_PACKET)  # where the final part starts
    # parts cut by offset: cutting the head off the rest each time copies it (quadratic)
    packets = [nonce + b"+" + body[at:at + MAX_PACKET] for at in range(0, last, MAX_PACKET)]
    packets.append(nonce + b" " + body[last:])
    return packets


def run_tests(code, count, start, rules, timeout, nonce, next_test, out=RESULT_FD,
              _clock=_monotonic):
    """Run the tests ``start .. count - 1``; one result per test, sent as soon as it is known.
    ``next_test()`` gives each test's expression (None: the worker closed the channel).

    Each test is bounded by an interval timer (an overrun is recorded as ``timeout`` and the
    next test runs) and, whatever the answer does with that timer (ignores it, swallows its
    exception), by its measured time: a test whose run and encoding took longer than
    ``timeout`` is recorded as ``timeout``. The builtins are put back after every test. A
    ``begin`` packet goes first: the worker times each test from the kernel's receive
    timestamps of these packets.
    """
    try:
        compiled = compile(code, "<answer>", "exec")
    except BaseException as error:  # a syntax error fails every test, as exec would
        compiled, failure = None, type(error).__name__
    send_packet(out, nonce + b"B")
    for index in range(start, count):
        expression = next_test()
        if expression is None:
            return
        if compiled is None:
            line = (index, "error", failure)
        else:
            began, ended = _clock(), None
            try:
                signal.setitimer(signal.ITIMER_REAL, timeout)
                value = _run_test(compiled, code, expression, rules)
                signal.setitimer(signal.ITIMER_REAL, 0)
                ended = _clock()  # encoding is not the answer's time (its size is bounded)
                BUILTINS.restore()  # first: the check below uses type() and len()
                if not _quick(value):
                    # the worker gives encoding its own allowance (a number, a short text or
                    # a short flat container of them is written at once: no packet, no
                    # wake-up of the worker)
                    send_packet(out, nonce + b"E")
                line = (index, "ok", _encode_output(value))
            except _TestTimeout:
                BUILTINS.restore()
                line = (index, "timeout", f"over {timeout} s")
            except BaseException as error:
                signal.setitimer(signal.ITIMER_REAL, 0)
                BUILTINS.restore()
                line = (index, "error", type(error).__name__)
            signal.setitimer(signal.ITIMER_REAL, 0)
            if (ended or _clock()) - began > timeout:  # the timer was ignored, swallowed or late
                line = (index, "timeout", f"over {timeout} s")
        for packet in record_packets(nonce, *line):
            send_packet(out, packet)


def warm_up(devnull_fd, rounds=12):
    """Run a trusted job through every path here, in the worker, before any fork.

    CPython builds some state lazily, on first use, and would otherwise build it again in
    every child, writing (so copying) pages of the worker each time: the AST node types of
    the first ``compile`` (about 1.3 ms), the encoder's caches, and each function's adapted
    bytecode, which 3.11 rewrites after its first 8 calls and then leaves alone. So the job
    comes the way a child's does, through a :class:`JobChannel` into :func:`serve`.
    """
    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        code = "def f(x):\n    return [x, str(x), (x, 1.5), {x: None}, {x}, x == 1]\n"
        tests = ["f(1)", "f('a')", "missing(1)", "f(2) == [2]"]
        for _ in range(rounds):
            for rules in RULE_SETS:
                task = {"code": code, "count": len(tests), "start": 0, "rules": rules,
                        "timeout": 3600, "nonce": "0" * NONCE_LENGTH, "memory_mb": 0}
                read_end, write_end = os.pipe()
                with open(write_end, "wb") as sink:  # the whole job fits in a pipe's buffer
                    sink.write(job_header(task) + b"".join(map(text_line, tests)))
                try:
                    channel = JobChannel(read_end)
                    serve(parse_job(channel.line(), channel.line()), channel, _unbounded,
                          out=devnull_fd)
                finally:
                    os.close(read_end)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unbounded(job):
    """The warm-up's bounds: none (its job is trusted)."""


def text_line(text):
    """A text as one line: a JSON string literal (ASCII, as ``json.dumps`` writes it)."""
    return json_string(text).encode() + b"\n"


def _text(line):
    """The text of a line :func:`text_line` wrote (without its newline)."""
    literal = line.decode("ascii")
    if literal[:1] != '"':
        raise ValueError("not a JSON string")
    text, end = _json.scanstring(literal, 1)
    if end != len(literal):
        raise ValueError("not one JSON string")
    return text


def job_header(task):
    """A job's header as the worker writes it: two lines, ``count start timeout memory_mb
    rules nonce`` and the answer (:func:`text_line`)."""
    numbers = b"%d %d %r %d %s %s\n" % (task["count"], task["start"], float(task["timeout"]),
                                          task["memory_mb"], task["rules"].encode(),
                                          task["nonce"].encode())
    return numbers + text_line(task["code"])


def parse_job(numbers, code):
    """A job from the header's two lines (bytes), as :func:`job_header` wrote them."""
    count, start, timeout, memory_mb, rules, nonce = numbers.split()
    if len(nonce) != NONCE_LENGTH:
        raise ValueError("bad nonce")
    return {"count": int(count), "start": int(start), "timeout": float(timeout),
            "memory_mb": int(memory_mb), "rules": rules.decode(), "nonce": nonce.decode(),
            "code": _text(code)}


def parse_test(line):
    """A test line (bytes) as :func:`text_line` wrote it; None at end of input."""
    return None if line is None else _text(line)


class JobChannel:
    """Lines from the job channel. Lines come one at a time (the worker writes a test only
    after the previous record), but an answer that sends records early can make two wait at
    once: none is dropped."""

    def __init__(self, fd):
        self.fd, self.pending = fd, bytearray()

    def line(self):
        """The next line without its newline; None once the channel is closed."""
        while True:
            end = self.pending.find(b"\n")
            if end >= 0:
                line = bytes(self.pending[:end])
                del self.pending[:end + 1]
                return line
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return None
            self.pending += chunk


def serve(job, channel, confine_for, out=RESULT_FD):
    """Run ``job``, whose tests come from ``channel``, after ``confine_for(job)`` applied the
    job's bounds (before any of its code runs). One job per child: nothing a job leaves in
    this process (patched modules, a changed decimal context, finalizers) reaches another."""
    if signal.getsignal(signal.SIGALRM) is not on_alarm:  # a child has it from the zygote
        signal.signal(signal.SIGALRM, on_alarm)
    confine_for(job)
    run_tests(job["code"], job["count"], job["start"], job["rules"], job["timeout"],
              job["nonce"].encode(), lambda: parse_test(channel.line()), out=out)
