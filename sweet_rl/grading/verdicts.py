"""One test's verdict from the two outputs the sandbox sent (grading process).

:func:`judge` decodes a reference's and an answer's output (the wire format of
:mod:`~sweet_rl.grading.sandbox.sandbox_values`), applies the published grader's rule
(:mod:`~sweet_rl.grading.compare`) and writes a bounded text of each output
(:mod:`~sweet_rl.grading.test_report`); nothing an answer returns may make it raise.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from sweet_rl.grading.compare import resolve, verdict
from sweet_rl.grading.decode import DecodeError, decode
from sweet_rl.grading.test_report import cut, result_entry, short_repr, status_text


def judge(reference: List[str], answer: List[str], test: str) -> Tuple[str, Dict[str, object]]:
    """``(verdict, test result)`` of one test, never raising: nothing an answer returns may
    end a grading run; an unexpected failure fails that one test and names the exception.

    The result (``test``, ``passed``, ``expected``, ``got``) is written from the same decoded
    outputs the verdict compared, after the verdict, and by :mod:`test_report`'s bounded
    writer: it cannot change a verdict, and a failure to write it only says so."""
    try:
        verdict_word, expected, got = _judge(reference, answer)
    except BaseException as error:  # noqa: BLE001 - includes RecursionError, MemoryError
        verdict_word = f"fail:{type(error).__name__}"
        expected = got = f"(not shown: {type(error).__name__})"
    try:
        texts = [text if isinstance(text, str) else short_repr(text.value)
                 for text in (expected, got)]
    except BaseException as error:  # noqa: BLE001
        texts = [f"(not shown: {type(error).__name__})"] * 2
    return verdict_word, result_entry(test, verdict_word == "pass", *texts)


class _Shown:
    """A decoded output, to be written as text once the verdict is made."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _decoded(status: str, detail: str, whose: str):
    """``(decoded output or None, what went wrong or None, text in its place or None)``."""
    if status != "ok":
        return None, None, status_text(status, detail, whose)
    try:
        return decode(detail), None, None
    except DecodeError:
        return None, "crash", cut(f"{whose} crash (unreadable output)".strip())


def _resolved(value):
    """The output with a comparing test's chain applied (strict rules): ``(output, None)``,
    or ``(None, exception name)`` for what applying the chain raised (as evaluating the test
    would have)."""
    try:
        return resolve(value), None
    except Exception as error:  # noqa: BLE001 - the original's eval would have given None
        return None, type(error).__name__


def _judge(reference: List[str], answer: List[str]):
    """``(verdict, expected, got)``: the verdict word (the published rule, see the module
    docstring), and each output as a :class:`_Shown` value or a text saying why there is
    none. Both outputs are decoded first, so each can be shown whatever the other did; the
    verdict then checks in the original's order: the reference's status, the answer's status,
    the reference's output, the answer's output, then ``==``."""
    ref_status, ref_detail = reference
    status, detail = answer
    raw_expected, ref_problem, expected_text = _decoded(ref_status, ref_detail, "reference")
    raw_got, problem, got_text = _decoded(status, detail, "")
    expected = expected_text or _Shown(raw_expected)
    got = got_text or _Shown(raw_got)
    if ref_status != "ok":
        return f"reference:{ref_status}", expected, got
    if status == "error":
        return f"error:{detail}", expected, got
    if status != "ok":
        return status, expected, got
    if ref_problem:
        return f"reference:{ref_problem}", expected, got
    value, error = _resolved(raw_expected)
    if error:
        return f"reference:{error}", expected, got
    if value is None:
        return "reference:None", expected, got
    if problem:
        return problem, expected, got
    output, error = _resolved(raw_got)
    if error:
        return f"error:{error}", expected, got
    return verdict(value, output), expected, got
