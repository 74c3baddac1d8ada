"""The child side of the sandbox, in-process: builtins guard, dict version probe, result lines.

``sandbox_child`` is loaded the way the worker loads it (by path, as a top-level module).
The guard's real use, inside forked children, is covered by the adversarial test file.
"""

import builtins
import importlib
import json
import os
import sys

import pytest

SANDBOX = os.path.join(os.path.dirname(__file__), "..", "..", "sweet_rl", "grading", "sandbox")


@pytest.fixture(scope="module")
def child():
    sys.path.insert(0, os.path.abspath(SANDBOX))
    try:
        yield importlib.import_module("sandbox_child")
    finally:
        sys.path.pop(0)


def test_dict_version_moves_on_every_change_and_only_then(child):
    mapping = {"a": 1}
    tag = child.dict_version_view(mapping)
    assert tag is not None, "CPython dicts carry a version tag (PEP 509)"
    first = tag.value
    _ = mapping["a"], list(mapping.items()), len(mapping)
    assert tag.value == first
    mapping["a"] = 2
    second = tag.value
    mapping["b"] = 3
    third = tag.value
    del mapping["b"]
    assert len({first, second, third, tag.value}) == 4


@pytest.mark.parametrize("use_version", [True, False], ids=["version-tag", "value-by-value"])
def test_guard_puts_monkeypatched_builtins_back(child, use_version):
    guard = child.BuiltinsGuard()
    if not use_version:
        guard._tag = None
    original_len = builtins.len
    assert guard.unchanged()
    try:
        builtins.len = lambda value: 42
        builtins.sweet_rl_extra = "added"
        assert not guard.unchanged()
        guard.restore()
        assert builtins.len is original_len
        assert not hasattr(builtins, "sweet_rl_extra")
        assert guard.unchanged()
        del builtins.print  # a removal is a change too
        assert not guard.unchanged()
        guard.restore()
        assert callable(builtins.print) and guard.unchanged()
    finally:
        builtins.len = original_len
        builtins.__dict__.pop("sweet_rl_extra", None)


def test_result_lines_are_json_with_awkward_details(child):
    for detail in ['{"s":"a\\"b"}', "über\nline", "over 0.2 s"]:
        line = child.result_line(3, "ok", detail)
        assert line.endswith("\n") and line.count("\n") == 1
        assert json.loads(line) == [3, "ok", detail]


def test_benchmark_namespace_is_the_published_graders(child):
    # the published grader exec's the code inside a function of sweet_rl/utils/code_utils.py:
    # module globals (with its imports), that function's locals, a fresh copy per test here
    code = (
        "e = 1\nx = 5\ndef f():\n    global leaked\n    leaked = globals().get('leaked', 0) + 1\n"
        "    return (__name__, leaked, signal.SIGINT.name, Empty.__name__)\n"
    )
    compiled = compile(code, "<answer>", "exec")
    assert child._run_test(compiled, code, "f()", "benchmark") == (
        "sweet_rl.utils.code_utils", 1, "SIGINT", "Empty")
    assert child._run_test(compiled, code, "f()", "benchmark")[1] == 1  # no leak between tests
    test = "len(function_definition), test_case"
    assert child._run_test(compiled, code, test, "benchmark") == (len(code), test)
    assert child._run_test(compiled, code, "x", "benchmark") == 5
    with pytest.raises(NameError):  # `e` is an unbound local of the grader's function
        child._run_test(compiled, code, "e", "benchmark")
    with pytest.raises(NameError):  # strict rules run a plain module
        child._run_test(compiled, code, "f()", "strict")


def test_multiprocessing_is_imported_on_first_use(child):
    lazy = child.BENCHMARK_GLOBALS["multiprocessing"]
    assert lazy.__name__ == "multiprocessing"
    assert lazy.current_process().name  # the attribute use imports the real module
    assert "current_process" in vars(lazy)


def test_strict_rules_send_a_comparisons_operands(child):
    code = "def f(x):\n    return x * 2\n"
    compiled = compile(code, "<answer>", "exec")
    compared = child._run_test(compiled, code, "0 < f(1) == 2 is not None", "strict")
    assert isinstance(compared, child.Compared)
    assert compared.codes == ["<", "==", "id1"] and compared.operands == [0, 2, 2, None]
    assert child._run_test(compiled, code, "f(1) == 2", "benchmark") is True  # evaluated whole
    assert child._run_test(compiled, code, "[f(1)]", "strict") == [2]  # not a comparison
    assert json.loads(child._encode_output(compared)) == ["?<,==,id1", 0, 2, 2, None]


def test_only_outputs_that_take_time_to_encode_ask_the_worker_for_an_allowance(child):
    # a number, a short text or a short flat container of them is encoded at once: no "E"
    # packet (no wake-up of the worker); anything nested, long or of another type asks first
    import socket

    asks = {"f(1)": False, "f('a')": False, "f([1, 'b', None, 2.5])": False,
            "f({'k': 1.5, 2: True})": False, "f(set())": False, "f((1,) * 64)": False,
            "f((1,) * 65)": True, "f([[1]])": True, "f({1: [1]})": True,
            "f(['a' * 5000])": True, "f('a' * 70000)": True, "f(Sub([1]))": True}
    code = "class Sub(list):\n    pass\n\ndef f(x):\n    return x\n"
    nonce = b"0" * child.NONCE_LENGTH
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    given = iter(asks)
    try:
        child.run_tests(code, len(asks), 0, "benchmark", 10.0, nonce,
                        lambda: next(given, None), out=theirs.fileno())
        theirs.close()
        kinds = []
        while True:
            packet = ours.recv(1 << 20)
            if not packet:
                break
            assert packet.startswith(nonce)
            kinds.append(packet[len(nonce):len(nonce) + 1])
    finally:
        ours.close()
    assert kinds[0] == b"B"
    records = b"".join(kinds[1:]).replace(b"+", b"").split(b" ")[:-1]  # each: b"E" or b""
    assert [record == b"E" for record in records] == list(asks.values())
    assert child._quick([1, "x"]) and not child._quick(type("L", (list,), {})([1]))
