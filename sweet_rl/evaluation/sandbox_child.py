"""What runs inside a confined sandbox child: the tests of one job, and their result lines.

Loaded by path by :mod:`sandbox_worker` (stdlib only). A child writes one JSON line per test
to ``RESULT_FD``: ``[index, status, detail]`` with status ``ok`` (detail: the value in the
wire format of :mod:`sandbox_values`), ``error`` (detail: the exception's class name) or
``timeout``. See :mod:`sandbox_worker` for fast and careful runs.

Everything here is written with the fork in mind: each page of the worker that a child
writes to is copied for that child, and the copies are most of what a child costs. So what
every child needs is prepared once in the worker (the pristine builtins, the encoder), and
the per-test checks avoid touching objects they do not need.
"""

import _ast
import _queue
import builtins
import json
import operator
import os
import signal
import sys

from sandbox_values import encode, encode_comparison, json_string

RESULT_FD, JOB_FD = 3, 4
READY = b"ready\n"  # a careful child's first line: from here on the clock of its first test runs


class _TestTimeout(BaseException):
    """Raised in the child by its interval timer when a test overruns (fast runs)."""


def _on_alarm(signum, frame):
    raise _TestTimeout()


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def dict_version_reader():
    """A function that reads a dict's private version tag, or None where that is not possible.

    CPython (PEP 509) gives every dict a tag that changes whenever the dict does. Reading it
    touches no object; comparing the builtins value by value writes to the reference count
    of every builtin, which in a fresh child copies about 70 pages of the worker (measured:
    0.14 ms, a tenth of a bare child). The tag sits right after the object header and the
    item count; a probe checks that every kind of change moves it and nothing else does, so
    an interpreter with another layout falls back to the value-by-value check.
    """
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes
    except ImportError:
        return None
    offset = 3 * ctypes.sizeof(ctypes.c_ssize_t)  # ob_refcnt, ob_type, ma_used

    def version(mapping):
        return ctypes.c_uint64.from_address(id(mapping) + offset).value

    probe = {"kept": 1}
    seen = [version(probe), version(probe)]
    probe["kept"] = 2
    seen.append(version(probe))
    probe["added"] = 3
    seen.append(version(probe))
    del probe["added"]
    seen.append(version(probe))
    probe.clear()
    seen.append(version(probe))
    return version if seen[0] == seen[1] and len(set(seen)) == len(seen) - 1 else None


class BuiltinsGuard:
    """Puts the builtins back after a test that changed them (made once, in the worker).

    An answer that monkeypatches ``len``, ``int``, ``__import__``… changes only its own test
    this way, never how its output is encoded or what its next test sees.
    """

    def __init__(self):
        self.pristine = dict(builtins.__dict__)
        self._version_of = dict_version_reader()
        self._version = self._current_version()

    def _current_version(self):
        return self._version_of(builtins.__dict__) if self._version_of else None

    def unchanged(self):
        namespace, pristine = builtins.__dict__, self.pristine
        if self._version_of is not None:
            return self._version_of(namespace) == self._version
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


def run_tests(code, tests, start, rules, timeout=None, out=RESULT_FD):
    """One result line per test, from ``start`` on.

    With ``timeout`` (fast runs) each test is bounded by an interval timer and all lines are
    written together at the end; without it each line is written as soon as it is known and
    the worker keeps the time. The builtins are put back after every test. ``out`` is the
    file descriptor written to (the worker's warm-up writes to /dev/null).
    """
    try:
        compiled = compile(code, "<answer>", "exec")
    except BaseException as error:  # a syntax error fails every test, as exec would
        compiled, failure = None, type(error).__name__
    batch = []
    for index in range(start, len(tests)):
        if compiled is None:
            line = (index, "error", failure)
        else:
            try:
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, timeout)
                value = _run_test(compiled, code, tests[index], rules)
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                BUILTINS.restore()
                line = (index, "ok", _encode_output(value))
            except _TestTimeout:
                BUILTINS.restore()
                line = (index, "timeout", f"over {timeout} s")
            except BaseException as error:
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                BUILTINS.restore()
                line = (index, "error", type(error).__name__)
        if timeout:
            batch.append(result_line(*line))
        else:
            write_all(out, result_line(*line).encode())
    if batch:
        write_all(out, "".join(batch).encode())


def warm_up(devnull_fd, rounds=12):
    """Run a trusted job through every path here, in the worker, before any fork.

    CPython builds some state lazily, on first use, and would otherwise build it again in
    every child, writing (so copying) pages of the worker each time: the AST node types of
    the first ``compile`` (about 1.3 ms), the encoder's caches, and each function's adapted
    bytecode, which 3.11 rewrites after its first 8 calls and then leaves alone.
    """
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        code = "def f(x):\n    return [x, str(x), (x, 1.5), {x: None}, {x}, x == 1]\n"
        tests = ["f(1)", "f('a')", "missing(1)", "f(2) == [2]"]
        for _ in range(rounds):
            for rules in ("benchmark", "strict"):
                run_tests(code, tests, 0, rules, timeout=3600, out=devnull_fd)
                run_tests(code, tests, 0, rules, out=devnull_fd)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_job(job):
    run_tests(job["code"], job["tests"], job["start"], job["rules"],
              job["timeout"] if job.get("fast") else None)


def child_main(job_fd, job=None):
    """Run ``job`` (inherited through the fork) and return, or, for a reusable child, each
    job read from ``job_fd`` until it closes."""
    signal.signal(signal.SIGALRM, _on_alarm)
    if job is not None:
        if not job.get("fast"):  # careful runs time each test from here on
            write_all(RESULT_FD, READY)
        _run_job(job)
        return
    stream = os.fdopen(job_fd, "r", encoding="utf-8")
    write_all(RESULT_FD, READY)
    for line in stream:
        _run_job(json.loads(line))
