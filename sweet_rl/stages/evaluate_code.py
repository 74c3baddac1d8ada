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
from dataclasses import dataclass
from typing import Dict, List, Optional

from sweet_rl.evaluation.keys import REFUSED_KEY, RULES_KEY, TEST_RESULTS_KEY, VERDICTS_KEY
from sweet_rl.flags import flag
from sweet_rl.grading.grader import RULES  # the rule sets live with the grader that applies them
from sweet_rl.stages.evaluation import Evaluation, Outcome, run_evaluation
from sweet_rl.stages.groups import EvaluateOptions


@dataclass(kw_only=True)
class EvaluateCodeOptions(EvaluateOptions):
    """Grade a trajectory file in place and print the metrics line.

    Example:
        python scripts/evaluate_code.py outputs/demo.jsonl --k 2 \\
            --ground_truth_preference_path outputs/critic_pairs.jsonl
    """

    POSITIONAL = ("saved_path", "k", "preference_path", "ground_truth_preference_path")
    grader: str = flag(
        "``benchmark`` (the published rules, comparable with the paper) or ``strict`` (the "
        "answer runs as a module: helpers, recursion and imports work; no word list).",
        "benchmark", choices=RULES)
    timeout: float = flag("seconds per test case.", 1.0)
    memory_mb: int = flag("memory bound per sandboxed process, in MiB.", 2048)
    workers: Optional[int] = flag(
        "answers graded at once, each in its own process (default: one per core).", None)
    skip_errors: bool = flag(
        "leave rows whose dialogue hit a simulator error (a refused request, a dead server) "
        "out of the metrics and the pairs (they are still graded); without it they count, and "
        "a warning line says how many there are.", False)


class CodeEvaluation(Evaluation):
    """Hidden unit tests, run in the sandbox; success pairs (a passing rollout over a
    failing one of the same task)."""

    stage = "evaluate_code"

    def __init__(self, opts: EvaluateCodeOptions):
        super().__init__(opts)
        self.skip_errors = opts.skip_errors
        self.lost: List[str] = []  # sandbox layers a restarted worker came up without

    def check_rows(self, path, trajectories) -> None:
        from sweet_rl.records import RecordError

        for index, traj in enumerate(trajectories):
            if traj.task.test_cases is None:
                raise RecordError("missing (backend tasks need test cases)",
                                  field="task.test_cases", path=path, line=index + 1)

    def needs_score(self, trajectory) -> bool:
        return (trajectory.reward is None
                or trajectory.extra.get(RULES_KEY, "benchmark") != self.opts.grader)

    def nothing_to_score(self) -> str:
        return f"every trajectory already has a reward from the {self.opts.grader} rules"

    def score(self, trajectories, rows) -> None:
        from sweet_rl.grading.grader import Grader

        opts = self.opts
        items = [(trajectories[i].answer, trajectories[i].task.ground_truth,
                  trajectories[i].task.test_cases) for i in rows]
        sandbox = Grader(opts.grader, timeout=opts.timeout, memory_mb=opts.memory_mb,
                         workers=opts.workers or os.cpu_count() or 1)
        results = sandbox.grade(items, progress=True)
        # every worker's isolation at every start: a layer a restarted worker lacked is
        # listed under "lost_on_restart" (and named in the metrics line)
        self.arguments["sandbox_isolation"] = sandbox.isolation
        self.lost.extend(sandbox.isolation.get("lost_on_restart", []))
        for i, result in zip(rows, results):
            extra = trajectories[i].extra
            trajectories[i].reward = result.reward
            extra[RULES_KEY] = opts.grader
            # why each test passed or not (pass, fail, error:X, timeout, crash, blocked, ...)
            extra[VERDICTS_KEY] = result.tests
            extra[TEST_RESULTS_KEY] = result.test_results
            extra.pop(REFUSED_KEY, None)
            if result.refused:
                extra[REFUSED_KEY] = result.refused

    def pairs(self, rewards, k):
        from sweet_rl.evaluation.preferences import success_pairs

        return success_pairs(rewards, k)

    def report(self, outcome: Outcome):
        best, k = outcome.best, outcome.k
        correctness = 100.0 * sum(best) / len(best)
        success = 100.0 * sum(r >= 1.0 for r in best) / len(best)
        pairs = len(outcome.pairs)
        pair_note = f", {pairs} preference pairs" if outcome.pairs_written else ""
        lost = self.lost
        lost_note = f", sandbox layers lost on a restart: {' '.join(lost)}" if lost else ""
        line = (f"evaluate_code: {len(outcome.rewards)} trajectories ({len(best)} tasks x {k}), "
                f"best-of-{k} tests passed {correctness:.1f}%, success {success:.1f}%, "
                f"graded {outcome.scored}, rules {self.opts.grader}{pair_note}{lost_note}")
        original = original_summary(outcome.rewards, best, k,
                                    pairs if outcome.pairs_written else None)
        return {"correctness": correctness, "success": success, "pairs": pairs}, [line] + original


def evaluate_code(opts: EvaluateCodeOptions) -> Dict:
    """Grade the file in place, write pairs and sidecars, print the lines; the metrics."""
    return run_evaluation(CodeEvaluation(opts))[0]


def original_summary(rewards: List[float], best: List[float], k: int,
                     pairs: Optional[int] = None) -> List[str]:
    """The published evaluation's summary lines: over all rows, then over best-of-k, then the
    number of pairs when pairs were written. Its best-of-k mean is numpy's, whose pairwise
    summation can differ from a plain sum in the last digit."""
    total = 0  # the original's sum(): left to right from the int 0 (3.12's sum() compensates)
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
