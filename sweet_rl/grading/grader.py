"""Backend grading: each answer and each reference runs in the sandbox, verdicts are made here.

Per task, the reference solution and then the answer are run against the task's test
expressions, each in fresh children of a sandbox worker's fork server (which never holds a job,
so no answer can find a reference, or anything of another job, in the memory it inherited),
each test bounded in time and memory. Their outputs come back in the safe wire format of
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

Tasks are spread over ``workers`` threads, each with a worker process of its own, so grading
uses every core; references are cached, so k rollouts of a task run it once.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from sweet_rl.grading.code_extraction import extract_code, is_blocked
from sweet_rl.grading.sandbox.client import SandboxWorker, close_all, weakest
from sweet_rl.grading.test_report import result_entry
from sweet_rl.grading.verdicts import judge

logger = logging.getLogger(__name__)


def _key(item: GradeItem) -> tuple:
    """What a reference's outputs are cached under: its code and its tests."""
    return item[1], tuple(item[2].values())


def _take(todo: "queue.Queue[int]") -> Optional[int]:
    try:
        return todo.get_nowait()
    except queue.Empty:
        return None

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
        # per worker slot, the pages its fork server copies into each child at the fork
        # (sandbox_pinning; 0 where the kernel refused)
        self.pinned_pages: Dict[int, int] = {}
        # per worker slot, MiB of the interpreter's code its children share in huge pages
        # (sandbox_hugetext; 0 where the kernel could not)
        self.huge_code_mib: Dict[int, int] = {}
        self._reference_cache: Dict[tuple, List[List[str]]] = {}

    def grade(self, items: Sequence[GradeItem], progress: bool = False) -> List[GradeResult]:
        results: List[Optional[GradeResult]] = [None] * len(items)
        todo: "queue.Queue[int]" = queue.Queue()
        for index in range(len(items)):
            todo.put(index)
        bar = None  # without a bar tqdm is not even imported (some 30 ms of a short batch)
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(items), desc=f"grading ({self.rules} rules)")
        lock = threading.Lock()
        failures: List[BaseException] = []
        self.isolation = {}

        def work(slot: int) -> None:
            # One worker runs the thread's references and answers, one job after another, on
            # one CPU (sandbox_confine.pin_to_one_cpu): a task's reference never runs beside
            # its answer. Every job runs in fresh children of a fork server that never holds a
            # job, so a reference and an answer need no worker apart.
            started_workers: List[SandboxWorker] = []
            try:
                started_workers.append(SandboxWorker(slot, self.scratch_root, self.memory_mb,
                                                     rules=self.rules))
                worker = started_workers[0]
                with lock:
                    self._note_isolation(started_workers)
                index, started = _take(todo), None
                while index is not None:
                    following = _take(todo)
                    upcoming = None if following is None else items[following]
                    results[index], started = self._grade_one(items[index], worker, started,
                                                              upcoming)
                    index = following
                    with lock:
                        self._note_isolation(started_workers)  # a restart may lose a layer
                        if bar is not None:
                            bar.update(1)
            except BaseException as error:  # surfaced below, after every thread stopped
                failures.append(error)
            finally:
                close_all(started_workers)  # never raises

        threads = [threading.Thread(target=work, args=(slot,), daemon=True)
                   for slot in range(min(self.workers, max(1, len(items))))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if bar is not None:
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
            self.pinned_pages[worker.slot] = worker.pinned_pages
            self.huge_code_mib[worker.slot] = worker.huge_code_mib
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

    def _blocked(self, answer: str) -> Optional[str]:
        # the published grader tests the whole answer, prose included, before cutting the code
        return is_blocked(answer) if self.rules == "benchmark" else None

    def _start_reference(self, item: GradeItem, worker: SandboxWorker) -> Optional[tuple]:
        """Send ``item``'s reference to ``worker`` when it will be needed and is not known
        yet; its key (for :meth:`_grade_one` to collect it), or None."""
        answer, reference_code, test_cases = item
        key = _key(item)
        if not test_cases or key in self._reference_cache or self._blocked(answer):
            return None
        worker.submit(reference_code, list(key[1]), self.rules, self.reference_timeout,
                      self.memory_mb, reference=True)
        return key

    def _grade_one(self, item: GradeItem, worker: SandboxWorker,
                   started: Optional[tuple] = None,
                   upcoming: Optional[GradeItem] = None) -> Tuple[GradeResult, Optional[tuple]]:
        """One answer's verdict, and the key of ``upcoming``'s reference if it was sent.

        ``started``: the key of this item's reference, already sent to ``worker``
        (:meth:`_start_reference`), collected here. ``upcoming``: the item this thread grades
        next; its reference is sent once this answer's outputs are in, and runs while they
        are compared here (the answer is done: the reference runs beside nothing of it)."""
        if started is not None:  # sent ahead: collected whatever happens next
            self._reference_cache[started] = worker.collect()
        result = self._verdict(item, worker)
        following = None if upcoming is None else self._start_reference(upcoming, worker)
        return result() if callable(result) else result, following

    def _verdict(self, item: GradeItem, worker: SandboxWorker):
        """The verdict, or (once the answer ran) a function that compares its outputs."""
        answer, reference_code, test_cases = item
        tests = list(test_cases.values())
        key = _key(item)
        if not tests:
            return GradeResult(0.0, 0, 0)
        blocked = self._blocked(answer)
        code = extract_code(answer)
        if blocked:
            not_run = [result_entry(test, False, "(not run: the answer was blocked)", "blocked")
                       for test in tests]
            return GradeResult(0.0, 0, len(tests), blocked_word=blocked,
                               tests=["blocked"] * len(tests), test_results=not_run)
        # the reference first, then the answer, one after the other in the thread's worker: an
        # answer never loses time to its reference. A reference runs in fresh children like an
        # answer: nothing it does to its process (a patched module, a changed decimal context,
        # a finalizer) reaches another task's
        reference = self._reference_cache.get(key)
        if reference is None:
            reference = worker.run(reference_code, tests, self.rules, self.reference_timeout,
                                   self.memory_mb, reference=True)
            self._reference_cache[key] = reference
        refused = worker.refused  # the answer's own packets only: its reference's came before
        outputs = worker.run(code, tests, self.rules, self.timeout, self.memory_mb)
        refused = worker.refused - refused

        def compare() -> GradeResult:
            judged = [judge(r, a, t) for r, a, t in zip(reference, outputs, tests)]
            verdicts = [verdict_word for verdict_word, _ in judged]
            passed = verdicts.count("pass")
            return GradeResult(passed / len(tests), passed, len(tests), tests=verdicts,
                               refused=refused, test_results=[result for _, result in judged])

        return compare
