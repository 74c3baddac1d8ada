"""What evaluate_code and evaluate_html share: an :class:`Evaluation` says what differs (which
rows to check, how a row is scored, which pairs the rewards give, what the metrics lines say)
and :func:`run_evaluation` does the rest.

Both read a trajectory file, check its rollout layout, score the rows that have no reward from
the current settings yet, write the rewards back into the same file, build the critic's
trajectory-level preference pairs with their rule, write the pair files and every sidecar, and
print their lines. Everything wrong with the input is raised before anything is written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from sweet_rl.records import Trajectory
from sweet_rl.stages.groups import EvaluateOptions

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What an evaluation found, for the command's metrics lines."""

    trajectories: List[Trajectory]
    k: int
    scored: int  # rows scored by this run (the others kept their reward)
    rewards: List[float]  # one per row, in file order (rows with errors left out if skipped)
    best: List[float]  # best-of-k reward per task
    pairs: List[Tuple[int, int]]  # (chosen row, rejected row)
    pairs_written: bool  # a pair file was asked for (the pair count is printed only then)

    @property
    def num_tasks(self) -> int:
        return len(self.best)


class Evaluation:
    """One evaluation stage. ``arguments`` is what the sidecars record: the options, plus
    what scoring learns (e.g. the browser that rendered the pages)."""

    stage = "evaluate"
    skip_errors = False  # leave rows with simulator errors out of the metrics and the pairs

    def __init__(self, opts: EvaluateOptions):
        self.opts = opts
        self.arguments = opts.flags()

    def check_rows(self, path: str, trajectories: List[Trajectory]) -> None:
        """Refuse rows this evaluation cannot score (a RecordError naming file and line)."""

    def prepare(self, trajectories: List[Trajectory]) -> None:
        """Read whatever else the evaluation needs, once the rows are known good."""

    def needs_score(self, trajectory: Trajectory) -> bool:
        """Whether a row has no reward from this evaluation's settings yet."""
        return trajectory.reward is None

    def score(self, trajectories: List[Trajectory], rows: List[int]) -> None:
        """Set ``reward`` (and the evaluation's keys in ``extra``) of ``rows``, in place."""
        raise NotImplementedError

    def pairs(self, rewards: Sequence[float], k: int) -> List[Tuple[int, int]]:
        """(chosen row, rejected row) pairs the rewards give."""
        raise NotImplementedError

    def nothing_to_score(self) -> str:
        return "every trajectory already has a reward"

    def report(self, outcome: Outcome) -> Tuple[Dict, List[str]]:
        """(metrics, printed lines: ours first, then the original's)."""
        raise NotImplementedError


def load_trajectories(saved_path: str, k: int, evaluation: Evaluation) -> List[Trajectory]:
    """The file's trajectories, checked: not empty, the evaluation's own row checks, the
    layout of k rollouts per task."""
    from sweet_rl.io import read_jsonl
    from sweet_rl.layout import check_rollout_layout
    from sweet_rl.records import RecordError

    trajectories: List[Trajectory] = read_jsonl(saved_path, Trajectory.from_dict)
    if not trajectories:
        raise RecordError("no trajectories", path=saved_path)
    evaluation.check_rows(saved_path, trajectories)
    check_rollout_layout(saved_path, trajectories, k)
    return trajectories


def without_errors(rewards: Sequence[float], k: int, errored) -> List[float]:
    """Best-of-k reward per task over the rollouts without errors (tasks with none left out)."""
    from sweet_rl.layout import row_matrix

    best = []
    for rows in row_matrix(len(rewards), k):
        kept = [rewards[r] for r in rows if r not in errored]
        if kept:
            best.append(max(kept))
    return best


def run_evaluation(evaluation: Evaluation) -> Tuple[Dict, List[Trajectory]]:
    """Load, score what needs it, write rewards, pairs and sidecars, print the lines;
    ``(metrics, trajectories)``.

    Rows whose dialogue hit a simulator error (``error`` or ``simulator_errors``: a refused
    request, a dead server) are counted and named in a warning line; with ``skip_errors``
    they are scored and written as usual but left out of the metrics and the pairs, and the
    metrics line says how many were skipped."""
    from sweet_rl.evaluation.preferences import best_of_k, pair_texts
    from sweet_rl.io import write_jsonl, write_sidecar

    opts, stage = evaluation.opts, evaluation.stage
    trajectories = load_trajectories(opts.saved_path, opts.k, evaluation)
    evaluation.prepare(trajectories)
    todo = [i for i, t in enumerate(trajectories) if opts.reevaluate or evaluation.needs_score(t)]
    if todo:
        evaluation.score(trajectories, todo)
        write_jsonl(opts.saved_path, trajectories)
    else:
        logger.info(evaluation.nothing_to_score())
    rewards = [t.reward for t in trajectories]
    errored = {i for i, t in enumerate(trajectories)
               if t.extra.get("error") or t.extra.get("simulator_errors")}
    best, pairs = best_of_k(rewards, opts.k), evaluation.pairs(rewards, opts.k)
    if errored and evaluation.skip_errors:
        best = without_errors(rewards, opts.k, errored)
        if not best:
            raise ValueError(f"{opts.saved_path}: every row carries a simulator error; nothing "
                             "is left to measure with --skip_errors")
        pairs = [(c, r) for c, r in pairs if c not in errored and r not in errored]
        rewards = [r for i, r in enumerate(rewards) if i not in errored]
    elif errored:
        print(f"{stage}: warning: {len(errored)} of {len(trajectories)} rows carry a simulator "
              "error (their dialogues were cut short or answered \"No response.\"); they are "
              "scored as they are: --skip_errors leaves them out of the metrics and pairs")
    for path, with_truth in ((opts.preference_path, False),
                             (opts.ground_truth_preference_path, True)):
        if path:
            write_jsonl(path, (pair_texts(trajectories[c], trajectories[r], with_truth)
                               for c, r in pairs))
            write_sidecar(path, evaluation.arguments, stage)
    write_sidecar(opts.saved_path, evaluation.arguments, stage)
    outcome = Outcome(trajectories, opts.k, len(todo), rewards, best, pairs,
                      bool(opts.preference_path or opts.ground_truth_preference_path))
    metrics, lines = evaluation.report(outcome)
    if errored and evaluation.skip_errors:
        lines[0] += f", skipped {len(errored)} rows with simulator errors"
        metrics["skipped_errors"] = len(errored)
    for line in lines:
        print(line)
    return metrics, trajectories
