"""The outline evaluate_code and evaluate_html share, so the two differ only in how a row is
scored (hidden unit tests vs CLIP similarity) and in the words of their metrics lines.

Both read a trajectory file, check its rollout layout, score the rows that have no reward from
the current settings yet, write the rewards back into the same file, build the critic's
trajectory-level preference pairs with their rule, write the pair files and every sidecar, and
print their lines. Everything wrong with the input is raised before anything is written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from sweet_rl.records import Trajectory

logger = logging.getLogger(__name__)

PairRule = Callable[[Sequence[float], int], List[Tuple[int, int]]]


def load_trajectories(
    saved_path: str, k: int, validate: Optional[Callable[[str, List[Trajectory]], None]] = None
) -> List[Trajectory]:
    """The file's trajectories, checked: not empty, the command's own row checks, the layout."""
    from sweet_rl.io import read_jsonl
    from sweet_rl.layout import check_rollout_layout
    from sweet_rl.records import RecordError

    trajectories: List[Trajectory] = read_jsonl(saved_path, Trajectory.from_dict)
    if not trajectories:
        raise RecordError("no trajectories", path=saved_path)
    if validate is not None:
        validate(saved_path, trajectories)
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


@dataclass
class Outcome:
    """What an evaluation found, for the command's metrics lines."""

    trajectories: List[Trajectory]
    k: int
    scored: int  # rows scored by this run (the others kept their reward)
    rewards: List[float]  # one per row, in file order
    best: List[float]  # best-of-k reward per task
    pairs: List[Tuple[int, int]]  # (chosen row, rejected row)
    pairs_written: bool  # a pair file was asked for (the pair count is printed only then)

    @property
    def num_tasks(self) -> int:
        return len(self.best)


def evaluate(stage: str, saved_path: str, trajectories: List[Trajectory], k: int,
             todo: List[int], score: Callable[[List[int]], None], pair_rule: PairRule,
             arguments: Dict, preference_path: Optional[str],
             ground_truth_preference_path: Optional[str], nothing_to_score: str,
             report: Callable[[Outcome], Tuple[Dict, List[str]]],
             skip_errors: bool = False) -> Dict:
    """Score rows ``todo`` with ``score`` (which sets their ``reward`` and ``extra`` in place),
    write everything, print ``report``'s lines and return its metrics.

    Rows whose dialogue hit a simulator error (``error`` or ``simulator_errors``: a refused
    request, a dead server) are counted and named in a warning line; with ``skip_errors``
    they are scored and written as usual but left out of the metrics and the pairs, and the
    metrics line says how many were skipped.

    ``arguments`` goes into the sidecars as it stands after scoring, so ``score`` may add
    what it learnt (e.g. the browser version)."""
    from sweet_rl.evaluation.preferences import best_of_k, pair_texts
    from sweet_rl.io import write_jsonl, write_sidecar

    if todo:
        score(todo)
        write_jsonl(saved_path, trajectories)
    else:
        logger.info(nothing_to_score)

    rewards = [t.reward for t in trajectories]
    errored = {i for i, t in enumerate(trajectories)
               if t.extra.get("error") or t.extra.get("simulator_errors")}
    best = best_of_k(rewards, k)
    pairs = pair_rule(rewards, k)
    if errored and skip_errors:
        best = without_errors(rewards, k, errored)
        if not best:
            raise ValueError(f"{saved_path}: every row carries a simulator error; nothing is "
                             "left to measure with --skip_errors")
        pairs = [(c, r) for c, r in pairs if c not in errored and r not in errored]
        rewards = [r for i, r in enumerate(rewards) if i not in errored]
    elif errored:
        print(f"{stage}: warning: {len(errored)} of {len(trajectories)} rows carry a simulator "
              "error (their dialogues were cut short or answered \"No response.\"); they are "
              "scored as they are: --skip_errors leaves them out of the metrics and pairs")
    for path, with_truth in ((preference_path, False), (ground_truth_preference_path, True)):
        if path:
            write_jsonl(
                path, (pair_texts(trajectories[c], trajectories[r], with_truth) for c, r in pairs)
            )
            write_sidecar(path, arguments, stage)
    write_sidecar(saved_path, arguments, stage)
    outcome = Outcome(trajectories, k, len(todo), rewards, best, pairs,
                      bool(preference_path or ground_truth_preference_path))
    metrics, lines = report(outcome)
    if errored and skip_errors:
        lines[0] += f", skipped {len(errored)} rows with simulator errors"
        metrics["skipped_errors"] = len(errored)
    for line in lines:
        print(line)
    return metrics
