"""Backend grading: each answer and each reference runs in the sandbox, verdicts are made here.

Per task, the reference solution and the answer are run against the task's test expressions
in *different* sandbox workers (a worker that ran a reference never runs an answer, so no
answer can find a reference in memory inherited from its worker), each test bounded in time
and memory. Their outputs come back in the safe wire format of
:mod:`~sweet_rl.grading.sandbox.sandbox_values` and are compared in this process, as the published
grader compares them in its own: a test passes when both ran and
``reference_output == answer_output and reference_output is not None`` holds, reference on
the left, an exception meaning "not passed" (:mod:`~sweet_rl.grading.sandbox.sandbox_compare`).

Two rule sets (recorded by the caller with every reward):

- ``benchmark``: the published ColBench grader's rules, so numbers compare with the paper —
  the word block list on the whole answer text, then the code fence rules of
  :mod:`~sweet_rl.grading.code_extraction`, and per test a fresh ``exec`` with the published
  grader's namespace (its module's globals, separate locals: see ``sandbox_child``);
- ``strict``: no block list, the answer runs as a module (helpers, recursion and imports
  work), and a test expression that is itself a comparison (``f(x) == 3``) has its operands
  sent back and compared here, so the answer's ``__eq__`` cannot decide it.

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
from sweet_rl.grading.sandbox.client import SandboxWorker
from sweet_rl.grading.sandbox.sandbox_compare import resolve, verdict
from sweet_rl.grading.sandbox.sandbox_decode import DecodeError, decode

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


def safe_verdict(reference: List[str], answer: List[str]) -> str:
    """:func:`_verdict` that never raises: nothing an answer returns may end a grading run;
    an unexpected failure fails that one test and names the exception."""
    try:
        return _verdict(reference, answer)
    except BaseException as error:  # noqa: BLE001 - includes RecursionError, MemoryError
        return f"fail:{type(error).__name__}"


def _output(detail: str):
    """The decoded output, with a comparing test's chain applied (strict rules); raises
    DecodeError, or what applying the chain raised (as evaluating the test would have)."""
    return resolve(decode(detail))


def _verdict(reference: List[str], answer: List[str]) -> str:
    ref_status, ref_detail = reference
    if ref_status != "ok":
        return f"reference:{ref_status}"
    status, detail = answer
    if status == "error":
        return f"error:{detail}"
    if status != "ok":
        return status
    try:
        expected = _output(ref_detail)
    except DecodeError:
        return "reference:crash"
    except Exception as error:  # noqa: BLE001 - the original's eval would have given None
        return f"reference:{type(error).__name__}"
    if expected is None:
        return "reference:None"
    try:
        got = _output(detail)
    except DecodeError:
        return "crash"
    except Exception as error:  # noqa: BLE001
        return f"error:{type(error).__name__}"
    return verdict(expected, got)


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

        def work(slot: int) -> None:
            try:
                with (
                    SandboxWorker(2 * slot, self.scratch_root, self.memory_mb) as reference_worker,
                    SandboxWorker(2 * slot + 1, self.scratch_root, self.memory_mb) as answer_worker,
                ):
                    self._note_isolation(answer_worker.isolation)
                    while True:
                        try:
                            index = todo.get_nowait()
                        except queue.Empty:
                            return
                        results[index] = self._grade_one(
                            items[index], reference_worker, answer_worker
                        )
                        with lock:
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

    def _note_isolation(self, isolation: Dict[str, object]) -> None:
        if not self.isolation:
            missing = [
                name
                for name, on in (
                    ("a private network", isolation.get("private_network")),
                    ("Landlock", isolation.get("landlock_abi")),
                    ("seccomp", isolation.get("seccomp")),
                )
                if not on
            ]
            if missing:
                logger.warning("the sandbox runs without %s on this machine: model-written code "
                               "is less isolated than it should be", ", ".join(missing))
        self.isolation = isolation

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
            return GradeResult(
                0.0, 0, len(tests), blocked_word=blocked, tests=["blocked"] * len(tests)
            )
        # the reference first, then the answer: both workers share one CPU (see
        # sandbox_confine.pin_to_one_cpu), and an answer must never lose time to its reference
        key = (reference_code, tuple(tests))
        reference = self._reference_cache.get(key)
        if reference is None:
            reference = reference_worker.run(reference_code, tests, self.rules,
                                             self.reference_timeout, self.memory_mb, reuse=True)
            self._reference_cache[key] = reference
        refused = answer_worker.refused
        outputs = answer_worker.run(code, tests, self.rules, self.timeout, self.memory_mb)
        refused = answer_worker.refused - refused
        verdicts = [safe_verdict(r, a) for r, a in zip(reference, outputs)]
        passed = verdicts.count("pass")
        return GradeResult(passed / len(tests), passed, len(tests), tests=verdicts,
                           refused=refused)
