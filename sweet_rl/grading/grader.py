"""Backend grading: each answer and each reference runs in the sandbox, verdicts are made here.

Per task, the reference solution and the answer are run against the task's test expressions
in *different* sandbox workers (a worker that ran a reference never runs an answer, so no
answer can find a reference in memory inherited from its worker), each test bounded in time
and memory. Their outputs come back in the safe wire format of
:mod:`~sweet_rl.grading.sandbox.sandbox_values` and are compared in this process, as the published
grader compares them in its own: a test passes when both ran and
``reference_output == answer_output and reference_output is not None`` holds, reference on
the left, an exception meaning "not passed" (:mod:`~sweet_rl.grading.compare`).

Two rule sets (recorded by the caller with every reward):

- ``benchmark``: the published ColBench grader's rules, so numbers compare with the paper —
  the word block list on the whole answer text, then the code fence rules of
  :mod:`~sweet_rl.grading.code_extraction`, and per test a fresh ``exec`` with the published
  grader's namespace (its module's globals, separate locals: see ``sandbox_child``);
- ``strict``: no block list, the answer runs as a module (helpers, recursion and imports
  work), and a test expression that is itself a comparison (``f(x) == 3``) has its operands
  sent back and compared here, so the answer's ``__eq__`` cannot decide it.

Besides the verdict words, each test keeps a short text of both outputs (``test_results``, see
:mod:`~sweet_rl.grading.test_report`), written from the decoded values after the verdict, so a
reader sees what failed and how without the grader ever running answer code to show it.

Tasks are spread over ``workers`` threads, each with its own pair of worker processes, so
grading uses every core; references are cached, so k rollouts of a task run it once.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from sweet_rl.grading.code_extraction import extract_code, is_blocked
from sweet_rl.grading.compare import resolve, verdict
from sweet_rl.grading.decode import DecodeError, decode
from sweet_rl.grading.sandbox.client import SandboxWorker, weakest
from sweet_rl.grading.test_report import cut, result_entry, short_repr, status_text

logger = logging.getLogger(__name__)

RULES = ("benchmark", "strict")
GradeItem = Tuple[str, str, Dict[str, str]]  # (answer, reference code, {test name: expression})


@dataclass
class GradeResult:
    """One answer's verdict. ``tests`` holds one word per test: ``pass``, ``fail`` (ran,
    different output), ``fail:<Exception>`` (comparing the outputs raised, e.g. the ValueError
    of a numpy array's truth value), ``error:<Exception>``, ``timeout``, ``crash``, ``blocked``,
    or ``reference:<why>`` when the reference itself gave no usable output."""

    reward: float
    passed: int
    total: int
    blocked_word: Optional[str] = None
    tests: List[str] = field(default_factory=list)
    refused: int = 0  # result packets the answer wrote itself (refused, never taken as results)
    # per test, in the task's order: {"test", "passed", "expected", "got"} (texts bounded)
    test_results: List[Dict[str, object]] = field(default_factory=list)


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


class Grader:
    """Grades batches of answers; owns no processes between calls."""

    def __init__(self, rules: str = "benchmark", timeout: float = 1.0, memory_mb: int = 2048,
                 workers: int = 1, reference_timeout: Optional[float] = None,
                 scratch_root: Optional[str] = None):
        if rules not in RULES:
            raise ValueError(f"rules must be one of {RULES}, got {rules!r}")
        if timeout <= 0 or memory_mb < 64 or workers < 1:
            raise ValueError("timeout must be positive, memory_mb at least 64, workers at least 1")
        self.rules, self.timeout, self.memory_mb, self.workers = rules, timeout, memory_mb, workers
        # references are trusted to be correct, not to be fast: give them more room
        self.reference_timeout = reference_timeout or max(10.0, 10 * timeout)
        self.scratch_root = (
            scratch_root  # where workers make their scratch folders (default: TMPDIR)
        )
        # the isolation every worker of the last grade() had, at every start; a layer a
        # restarted worker came up without is named in ``isolation["lost_on_restart"]``
        self.isolation: Dict[str, object] = {}
        self._reference_cache: Dict[tuple, List[List[str]]] = {}

    def grade(self, items: Sequence[GradeItem], progress: bool = False) -> List[GradeResult]:
        from tqdm import tqdm

        results: List[Optional[GradeResult]] = [None] * len(items)
        todo: "queue.Queue[int]" = queue.Queue()
        for index in range(len(items)):
            todo.put(index)
        bar = tqdm(total=len(items), desc=f"grading ({self.rules} rules)", disable=not progress)
        lock = threading.Lock()
        failures: List[BaseException] = []
        self.isolation = {}

        def work(slot: int) -> None:
            try:
                with (
                    SandboxWorker(2 * slot, self.scratch_root, self.memory_mb) as reference_worker,
                    SandboxWorker(2 * slot + 1, self.scratch_root, self.memory_mb) as answer_worker,
                ):
                    pair = (reference_worker, answer_worker)
                    with lock:
                        self._note_isolation(pair)
                    while True:
                        try:
                            index = todo.get_nowait()
                        except queue.Empty:
                            return
                        results[index] = self._grade_one(
                            items[index], reference_worker, answer_worker
                        )
                        with lock:
                            self._note_isolation(pair)  # a restart may have lost a layer
                            bar.update(1)
            except BaseException as error:  # surfaced below, after every thread stopped
                failures.append(error)

        threads = [threading.Thread(target=work, args=(slot,), daemon=True)
                   for slot in range(min(self.workers, max(1, len(items))))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        bar.close()
        if failures:
            raise failures[0]
        return results  # type: ignore[return-value]

    def _note_isolation(self, workers: Sequence[SandboxWorker]) -> None:
        """Fold what ``workers`` had at every start into :attr:`isolation` (under the lock)."""
        first = not self.isolation
        merged = dict(self.isolation)
        lost = set(merged.pop("lost_on_restart", []))
        for worker in workers:
            merged = weakest(merged, worker.weakest) if merged else dict(worker.weakest)
            lost.update(worker.lost)
        if lost:
            merged["lost_on_restart"] = sorted(lost)
        if first:
            missing = [
                name
                for name, on in (
                    ("a private network", merged.get("private_network")),
                    ("Landlock", merged.get("landlock_abi")),
                    ("seccomp", merged.get("seccomp")),
                    ("a pid namespace", merged.get("pid_namespace")),
                )
                if not on
            ]
            if missing:
                logger.warning("the sandbox runs without %s on this machine: model-written code "
                               "is less isolated than it should be", ", ".join(missing))
        self.isolation = merged

    def _grade_one(self, item: GradeItem, reference_worker: SandboxWorker,
                   answer_worker: SandboxWorker) -> GradeResult:
        answer, reference_code, test_cases = item
        tests = list(test_cases.values())
        if not tests:
            return GradeResult(0.0, 0, 0)
        # the published grader tests the whole answer, prose included, before cutting the code
        blocked = is_blocked(answer) if self.rules == "benchmark" else None
        code = extract_code(answer)
        if blocked:
            not_run = [result_entry(test, False, "(not run: the answer was blocked)", "blocked")
                       for test in tests]
            return GradeResult(0.0, 0, len(tests), blocked_word=blocked,
                               tests=["blocked"] * len(tests), test_results=not_run)
        # the reference first, then the answer: both workers share one CPU (see
        # sandbox_confine.pin_to_one_cpu), and an answer must never lose time to its reference.
        # A reference runs in fresh children like an answer: nothing it does to its process
        # (a patched module, a changed decimal context, a finalizer) reaches another task's
        key = (reference_code, tuple(tests))
        reference = self._reference_cache.get(key)
        if reference is None:
            reference = reference_worker.run(reference_code, tests, self.rules,
                                             self.reference_timeout, self.memory_mb, reference=True)
            self._reference_cache[key] = reference
        refused = answer_worker.refused
        outputs = answer_worker.run(code, tests, self.rules, self.timeout, self.memory_mb)
        refused = answer_worker.refused - refused
        judged = [judge(r, a, t) for r, a, t in zip(reference, outputs, tests)]
        verdicts = [verdict_word for verdict_word, _ in judged]
        passed = verdicts.count("pass")
        return GradeResult(passed / len(tests), passed, len(tests), tests=verdicts,
                           refused=refused, test_results=[result for _, result in judged])
