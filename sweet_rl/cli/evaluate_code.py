"""Stage: grade backend trajectories with the task's hidden unit tests.

Writes ``reward`` (fraction of tests passed) into the trajectory file, as the original does,
with why each test passed or not (``grader_tests``) and what each gave (``test_results``:
the test, whether it passed, the reference's and the answer's output as short texts), and
prints best-of-k correctness and success, and optionally writes the critic's trajectory-level
preference pairs. Grading runs every answer and reference in an isolated, bounded process.

Our metrics line comes first; the original's summary lines follow, in its wording and
number format (raw fractions as Python prints floats), so scripts that parse them still do.
"""

from __future__ import annotations

import os
from typing import List, Optional

from sweet_rl.grading.grader import RULES  # the rule sets live with the grader that applies them

RULES_KEY = "grader_rules"  # extra key recording which rules produced ``reward``
VERDICTS_KEY = "grader_tests"  # one word per test: why it passed or not
REFUSED_KEY = "grader_refused"  # result packets the answer forged (refused)
# per test, in the task's order: {"test", "passed", "expected", "got"}, texts cut to 200
# characters (sweet_rl.grading.test_report), so a reader sees what failed and how
TEST_RESULTS_KEY = "test_results"


def main(saved_path: str, k: int = 1, preference_path: Optional[str] = None,
         ground_truth_preference_path: Optional[str] = None, grader: str = "benchmark",
         timeout: float = 1.0, memory_mb: int = 2048, workers: Optional[int] = None,
         reevaluate: bool = False, skip_errors: bool = False):
    """Grade a trajectory file in place and print the metrics line.

    Example:
        python scripts/evaluate_code.py outputs/demo.jsonl --k 2 \\
            --ground_truth_preference_path outputs/critic_pairs.jsonl

    Args:
        saved_path: trajectories from simulate; ``reward`` is written back into it.
        k: rollouts per task (simulate's --best_of_n), for best-of-k and pairs.
        preference_path: pairs of ``input + output`` of the last agent turn.
        ground_truth_preference_path: the same pairs prefixed with the reference solution.
        grader: ``benchmark`` (the published rules, comparable with the paper) or ``strict``
            (the answer runs as a module: helpers, recursion and imports work; no word list).
        timeout: seconds per test case.
        memory_mb: memory bound per sandboxed process, in MiB.
        workers: answers graded at once, each in its own process (default: one per core).
        reevaluate: grade again even rows that already carry a reward from the same rules.
        skip_errors: leave rows whose dialogue hit a simulator error (a refused request, a
            dead server) out of the metrics and the pairs (they are still graded); without it
            they count, and a warning line says how many there are.
    """
    arguments = dict(locals())
    from sweet_rl.cli.evaluate_common import evaluate, load_trajectories
    from sweet_rl.evaluation.preferences import success_pairs
    from sweet_rl.grading.grader import Grader
    from sweet_rl.records import RecordError

    if grader not in RULES:
        raise ValueError(f"--grader must be one of {RULES}, got {grader!r}")
    k = int(k)

    def validate(path, trajectories):
        for index, traj in enumerate(trajectories):
            if traj.task.test_cases is None:
                raise RecordError("missing (backend tasks need test cases)",
                                  field="task.test_cases", path=path, line=index + 1)

    trajectories = load_trajectories(saved_path, k, validate)
    lost: List[str] = []  # sandbox layers a restarted worker came up without
    todo = [i for i, t in enumerate(trajectories)
            if reevaluate or t.reward is None or t.extra.get(RULES_KEY, "benchmark") != grader]

    def score(rows):
        items = [(trajectories[i].answer, trajectories[i].task.ground_truth,
                  trajectories[i].task.test_cases) for i in rows]
        sandbox = Grader(
            grader, timeout=timeout, memory_mb=memory_mb, workers=workers or os.cpu_count() or 1
        )
        results = sandbox.grade(items, progress=True)
        # every worker's isolation at every start: a layer a restarted worker lacked is
        # listed under "lost_on_restart" (and named in the metrics line)
        arguments["sandbox_isolation"] = sandbox.isolation
        lost.extend(sandbox.isolation.get("lost_on_restart", []))
        for i, result in zip(rows, results):
            trajectories[i].reward = result.reward
            trajectories[i].extra[RULES_KEY] = grader
            # why each test passed or not (pass, fail, error:X, timeout, crash, blocked, ...)
            trajectories[i].extra[VERDICTS_KEY] = result.tests
            trajectories[i].extra[TEST_RESULTS_KEY] = result.test_results
            trajectories[i].extra.pop(REFUSED_KEY, None)
            if result.refused:
                trajectories[i].extra[REFUSED_KEY] = result.refused

    def report(outcome):
        best = outcome.best
        correctness = 100.0 * sum(best) / len(best)
        success = 100.0 * sum(r >= 1.0 for r in best) / len(best)
        pairs = len(outcome.pairs)
        pair_note = f", {pairs} preference pairs" if outcome.pairs_written else ""
        lost_note = f", sandbox layers lost on a restart: {' '.join(lost)}" if lost else ""
        line = (f"evaluate_code: {len(outcome.rewards)} trajectories ({len(best)} tasks x {k}), "
                f"best-of-{k} tests passed {correctness:.1f}%, success {success:.1f}%, "
                f"graded {outcome.scored}, rules {grader}{pair_note}{lost_note}")
        original = original_summary(
            outcome.rewards, best, k, pairs if outcome.pairs_written else None
        )
        return {"correctness": correctness, "success": success, "pairs": pairs}, [line] + original

    return evaluate("evaluate_code", saved_path, trajectories, k, todo, score, success_pairs,
                    arguments, preference_path, ground_truth_preference_path,
                    f"every trajectory already has a reward from the {grader} rules", report,
                    skip_errors=skip_errors)


def original_summary(rewards: List[float], best: List[float], k: int,
                     pairs: Optional[int] = None) -> List[str]:
    """The published evaluation's summary lines: over all rows, then over best-of-k, then the
    number of pairs when pairs were written. Its best-of-k mean is numpy's, whose pairwise
    summation can differ from a plain sum in the last digit."""
    total = (
        0  # the original's sum(): left to right from the int 0 (Python >= 3.12's sum() compensates)
    )
    for reward in rewards:
        total += reward
    lines = [
        f"Average correctness: {total / len(rewards)}",
        f"Number of trajectories: {len(rewards)}",
        f"Percentage of correct trajectories: {sum(1 for r in rewards if r == 1) / len(rewards)}",
        f"Best-of-{k} Average correctness: {numpy_mean(best)}",
        f"Best-of-{k} percentage of correct trajectories: "
        f"{sum(1 for r in best if r == 1) / len(best)}",
    ]
    if pairs is not None:
        lines.append(f"Number of preference pairs: {pairs}")
    return lines


def numpy_mean(values: List[float]) -> float:
    """What ``numpy.mean`` gives for a list of floats, without numpy (the tests check it
    against numpy): its pairwise sum divided by the count."""
    return _pairwise_sum([float(v) for v in values]) / len(values)


def _pairwise_sum(values: List[float]) -> float:
    """numpy's float summation: plain below 8 values, eight running sums up to 128, halves
    (cut at a multiple of 8) above."""
    count = len(values)
    if count < 8:
        result = 0.0
        for value in values:
            result += value
        return result
    if count <= 128:
        lanes = list(values[:8])
        stop = count - count % 8
        for start in range(8, stop, 8):
            for lane in range(8):
                lanes[lane] += values[start + lane]
        result = (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
                  + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])))
        for value in values[stop:]:
            result += value
        return result
    half = count // 2
    half -= half % 8
    return _pairwise_sum(values[:half]) + _pairwise_sum(values[half:])
