"""Trajectory-level preference pairs for the critic (pure logic, no files or models).

Rows follow the simulate layout (:mod:`sweet_rl.layout`).

Backend rule (original): per task, if the best rollout succeeded (reward >= 1), pair the first
best rollout (chosen) with every rollout whose reward is strictly lower (rejected).

Frontend rule (original): per task, every pair of rollouts whose rewards (CLIP similarities)
differ by at least a threshold (0.1), the higher one chosen. Runs are compared by win rate: the
share of tasks where one run's best-of-k page is closer to the reference than the other's.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from sweet_rl.layout import rollout_matrix, row_matrix
from sweet_rl.records import Trajectory
from sweet_rl.types import GROUND_TRUTH_PREFIX  # noqa: F401  (also imported from here)

# Rewards are floats: 0.3 - 0.2 is 0.0999...98. A difference this close to the threshold counts
# as reaching it, so a gap written as 0.1 behaves as 0.1 (far below any real CLIP difference).
THRESHOLD_TOLERANCE = 1e-9


def best_of_k(rewards: Sequence[float], k: int) -> List[float]:
    return [max(row) for row in rollout_matrix(rewards, k)]


def success_pairs(rewards: Sequence[float], k: int, success: float = 1.0) -> List[Tuple[int, int]]:
    """(chosen_row, rejected_row) pairs: best successful rollout vs each strictly worse one."""
    pairs = []
    for rows in row_matrix(len(rewards), k):
        row = [rewards[r] for r in rows]
        best = max(row)
        if best < success:
            continue
        best_j = row.index(best)
        for j, value in enumerate(row):
            if j != best_j and value < best:
                pairs.append((rows[best_j], rows[j]))
    return pairs


def threshold_pairs(
    rewards: Sequence[float], k: int, threshold: float = 0.1
) -> List[Tuple[int, int]]:
    """(chosen_row, rejected_row) for every two rollouts j < j2 of a task whose rewards differ by
    at least ``threshold``; the higher reward is chosen. Equal rewards never pair."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    pairs = []
    for rows in row_matrix(len(rewards), k):
        row = [rewards[r] for r in rows]
        for j in range(k):
            for j2 in range(j + 1, k):
                gap = abs(row[j] - row[j2])
                if gap == 0 or gap < threshold - THRESHOLD_TOLERANCE:
                    continue
                high, low = (j, j2) if row[j] > row[j2] else (j2, j)
                pairs.append((rows[high], rows[low]))
    return pairs


def win_rate(ours: Sequence[float], theirs: Sequence[float]) -> float:
    """Share (0..1) of tasks where ``ours[i] > theirs[i]``; a tie counts half.

    Both are per-task scores (e.g. best-of-k similarities) in the same task order."""
    if len(ours) != len(theirs):
        raise ValueError(f"win rate needs the same tasks: {len(ours)} scores against {len(theirs)}")
    if not ours:
        raise ValueError("win rate of no tasks")
    points = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(ours, theirs))
    return points / len(ours)


def last_agent_text(trajectory: Trajectory) -> str:
    """The whole dialogue as the agent's last turn saw and wrote it: ``input + output``."""
    turns = trajectory.assistant_turns
    if not turns:
        raise ValueError("trajectory has no assistant turn")
    last = turns[-1]
    return (last.input or "") + (last.output or "")


def pair_texts(chosen: Trajectory, rejected: Trajectory, with_ground_truth: bool) -> dict:
    """One ``{"chosen", "rejected"}`` record; with the ground truth both sides get the prefix
    built from the chosen trajectory's task (they share the task)."""
    prefix = ""
    if with_ground_truth:
        prefix = GROUND_TRUTH_PREFIX.format(ground_truth=chosen.task.ground_truth)
    return {
        "chosen": prefix + last_agent_text(chosen),
        "rejected": prefix + last_agent_text(rejected),
    }
