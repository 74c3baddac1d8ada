"""Writing dialogues as they finish, in the original's row order, crash-safely.

Pipelined dialogues finish in any order, but a trajectory file keeps the original's order
(row ``i + j * num_tasks``, :mod:`sweet_rl.layout`), and ``--to_continue`` counts the rows
already written. So a finished row goes straight to the output when every row before it is
there, and otherwise into a spill file beside it, ``<output>.pending.jsonl``, one
``{"row": r, "trajectory": {...}}`` per line, until its turn comes. Both are appended a whole
line at a time and fsynced (:func:`sweet_rl.io.append_jsonl`), so a killed run loses no
finished dialogue: on resume, the output's rows are kept, the spill file's later rows are
taken back without being played again, and only the rest is simulated. The spill file is
removed once the output holds every row.
"""

from __future__ import annotations

import os
from typing import Dict, List, Sequence

from sweet_rl.records import RecordError, Task, Trajectory


def pending_path(output_path: str) -> str:
    return output_path + ".pending.jsonl"


def restore_pending(output_path: str, rows: Sequence[Task], done: int) -> Dict[int, Trajectory]:
    """Rows of the spill file that the output does not hold yet (``row >= done``), checked to be
    the tasks those rows should hold. A torn last line (a killed writer) is dropped."""
    from sweet_rl.io import iter_jsonl, repair_tail

    path = pending_path(output_path)
    if not os.path.exists(path):
        return {}
    repair_tail(path)
    restored: Dict[int, Trajectory] = {}
    for number, entry in enumerate(iter_jsonl(path), start=1):
        row = entry.get("row") if isinstance(entry, dict) else None
        if not isinstance(row, int) or not 0 <= row < len(rows):
            raise RecordError(f"field 'row' is {row!r}, not a row of this run (0..{len(rows) - 1})",
                              path=path, line=number)
        try:
            trajectory = Trajectory.from_dict(entry.get("trajectory"))
        except RecordError as err:
            raise err.located(path, number) from None
        if trajectory.task.problem_description != rows[row].problem_description:
            raise RecordError(f"field 'trajectory.task.problem_description' differs from the task "
                              f"of row {row}; was the file made with other --input_path, "
                              "--num_tasks or --best_of_n?", path=path, line=number)
        if row >= done:
            restored[row] = trajectory
    return restored


class OrderedRowWriter:
    """Appends finished rows to ``output_path`` in row order (see the module docstring).

    ``next_row``: the first row the output does not hold yet; ``restored``: finished rows taken
    back from a spill file (they are already in it).
    """

    def __init__(self, output_path: str, next_row: int, restored: Dict[int, Trajectory] = None):
        self.output_path = output_path
        self.next_row = next_row
        self.waiting: Dict[int, Trajectory] = dict(restored or {})
        self._flush()

    def add(self, row: int, trajectory: Trajectory) -> None:
        from sweet_rl.io import append_jsonl

        if row < self.next_row or row in self.waiting:
            raise RuntimeError(f"row {row} was finished twice")
        if row != self.next_row:
            append_jsonl(pending_path(self.output_path),
                         [{"row": row, "trajectory": trajectory.to_dict()}])
        self.waiting[row] = trajectory
        self._flush()

    def add_many(self, rows: List[int], trajectories: List[Trajectory]) -> None:
        """Several finished rows (a lockstep batch); one append when they are the next ones."""
        from sweet_rl.io import append_jsonl

        if rows != list(range(self.next_row, self.next_row + len(rows))) or self.waiting:
            for row, trajectory in zip(rows, trajectories):
                self.add(row, trajectory)
            return
        append_jsonl(self.output_path, trajectories)
        self.next_row += len(rows)

    def _flush(self) -> None:
        from sweet_rl.io import append_jsonl

        ready = []
        while self.next_row in self.waiting:
            ready.append(self.waiting.pop(self.next_row))
            self.next_row += 1
        if ready:
            append_jsonl(self.output_path, ready)

    def finish(self, total: int) -> None:
        """Every row is in the output: drop the spill file."""
        if self.next_row != total or self.waiting:
            raise RuntimeError(f"{self.output_path}: {self.next_row} of {total} rows written, "
                               f"{len(self.waiting)} waiting")
        if os.path.exists(pending_path(self.output_path)):
            os.remove(pending_path(self.output_path))
