"""Where rollout j of task i sits in a trajectory file: row ``i + j * num_tasks``.

simulate writes every task once, then every task again for the next rollout, so a file of k
rollouts is k copies of the task list one after another (the original code's order). Every
stage that reads rows back by task -- simulate resuming, best-of-k, preference pairs, the win
rate against another run, the offline demo -- goes through these functions, so the order is
written down in one place.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple, TypeVar

from sweet_rl.records import RecordError

T = TypeVar("T")


def row_of(task: int, rollout: int, num_tasks: int) -> int:
    """The row holding rollout ``rollout`` of task ``task``."""
    return task + rollout * num_tasks


def task_of(row: int, num_tasks: int) -> int:
    """Which task (0-based, in task-file order) a row holds."""
    return row % num_tasks


def rollout_of(row: int, num_tasks: int) -> int:
    """Which rollout of its task a row is."""
    return row // num_tasks


def place(row: int, num_tasks: int) -> Tuple[int, int]:
    """``(task, rollout)`` of a row."""
    return task_of(row, num_tasks), rollout_of(row, num_tasks)


def lay_out(tasks: Sequence[T], k: int) -> List[T]:
    """The rows of a k-rollout run in file order: the task list k times over."""
    return [task for _ in range(int(k)) for task in tasks]


def task_count(num_rows: int, k: int) -> int:
    """How many tasks ``num_rows`` rows of k rollouts each hold (ValueError when they cannot)."""
    if k < 1 or num_rows % k:
        raise ValueError(f"{num_rows} trajectories cannot be split into k={k} rollouts per task")
    return num_rows // k


def row_matrix(num_rows: int, k: int) -> List[List[int]]:
    """``[task][rollout]`` -> row index, for ``num_rows`` rows of k rollouts per task."""
    num_tasks = task_count(num_rows, k)
    return [[row_of(i, j, num_tasks) for j in range(k)] for i in range(num_tasks)]


def rollout_matrix(values: Sequence[T], k: int) -> List[List[T]]:
    """``[task][rollout]`` view of one value per row (e.g. the rewards)."""
    return [[values[row] for row in rows] for rows in row_matrix(len(values), k)]


def check_rollout_layout(path: str, trajectories: Sequence, k: int) -> None:
    """Every rollout j of a file must hold the same tasks in the same order as rollout 0;
    otherwise best-of-k and the pairs would mix tasks (usually a wrong ``--k``)."""
    if k < 1:
        raise ValueError(f"--k must be at least 1, got {k}")
    if len(trajectories) % k:
        raise RecordError(
            f"has {len(trajectories)} trajectories, not a multiple of --k {k}", path=path
        )
    num_tasks = len(trajectories) // k
    for row in range(num_tasks, len(trajectories)):
        first = task_of(row, num_tasks)
        if (
            trajectories[row].task.problem_description
            != trajectories[first].task.problem_description
        ):
            raise RecordError(f"field 'task.problem_description' differs from row {first + 1}"
                              f" (rows i + j*num_tasks must hold the same task; is --k {k} right?)",
                              path=path, line=row + 1)
