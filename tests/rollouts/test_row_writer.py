"""Rows written as they finish, in row order, with a spill file for rows that finish early."""

from __future__ import annotations

import json

import pytest

from sweet_rl.io import read_jsonl
from sweet_rl.records import RecordError, Task, Trajectory, Turn
from sweet_rl.rollouts.row_writer import OrderedRowWriter, pending_path, restore_pending

TASKS = [Task(problem_description=f"task {i}", ground_truth="g") for i in range(4)]


def _row(i: int) -> Trajectory:
    return Trajectory(task=TASKS[i], answer=f"answer {i}",
                      dialogue_history=[Turn(role="user", content=f"task {i}")])


def _answers(path) -> list:
    return [row["answer"] for row in read_jsonl(str(path))]


def test_rows_reach_the_output_in_order_and_early_ones_wait_in_the_spill_file(tmp_path):
    out = tmp_path / "traj.jsonl"
    writer = OrderedRowWriter(str(out), 0)
    writer.add(2, _row(2))
    writer.add(1, _row(1))
    assert not out.exists()  # row 0 is not done: nothing can be written yet
    spilled = [json.loads(line)["row"] for line in open(pending_path(str(out)))]
    assert spilled == [2, 1]
    writer.add(0, _row(0))  # 0, then the waiting 1 and 2
    assert _answers(out) == ["answer 0", "answer 1", "answer 2"]
    writer.add(3, _row(3))  # the next row goes straight to the output
    assert [json.loads(line)["row"] for line in open(pending_path(str(out)))] == [2, 1]
    writer.finish(4)
    assert _answers(out) == [f"answer {i}" for i in range(4)]
    assert not (tmp_path / "traj.jsonl.pending.jsonl").exists()


def test_a_crashed_writer_is_resumed_from_its_output_and_spill_file(tmp_path):
    out = tmp_path / "traj.jsonl"
    first = OrderedRowWriter(str(out), 0)
    for i in (0, 3, 2):
        first.add(i, _row(i))
    with open(pending_path(str(out)), "ab") as handle:  # a kill in the middle of a write
        handle.write(b'{"row": 1, "traj')
    # the crash: ``first`` is dropped; a resumed run reads what is on disk
    restored = restore_pending(str(out), TASKS, done=1)
    assert sorted(restored) == [2, 3]
    second = OrderedRowWriter(str(out), 1, restored)
    second.add(1, _row(1))
    second.finish(4)
    assert _answers(out) == [f"answer {i}" for i in range(4)]
    with pytest.raises(RuntimeError, match="row 1 was finished twice"):
        second.add(1, _row(1))


def test_a_spill_file_of_another_run_is_refused_with_its_line(tmp_path):
    out = tmp_path / "traj.jsonl"
    pending = pending_path(str(out))
    with open(pending, "w") as handle:
        handle.write(json.dumps({"row": 0, "trajectory": _row(0).to_dict()}) + "\n")
        handle.write(json.dumps({"row": 1, "trajectory": _row(2).to_dict()}) + "\n")
    with pytest.raises(RecordError, match=r"pending.jsonl, line 2: field "
                                          r"'trajectory.task.problem_description' differs"):
        restore_pending(str(out), TASKS, done=0)
    with open(pending, "w") as handle:
        handle.write(json.dumps({"row": 9, "trajectory": _row(0).to_dict()}) + "\n")
    with pytest.raises(RecordError, match=r"line 1: field 'row' is 9, not a row of this run"):
        restore_pending(str(out), TASKS, done=0)


def test_a_lockstep_batch_is_one_append_unless_rows_wait(tmp_path):
    out = tmp_path / "traj.jsonl"
    writer = OrderedRowWriter(str(out), 0)
    writer.add_many([0, 1], [_row(0), _row(1)])
    assert _answers(out) == ["answer 0", "answer 1"]
    writer.add_many([3, 2], [_row(3), _row(2)])  # not the next rows in order: one by one
    writer.finish(4)
    assert _answers(out) == [f"answer {i}" for i in range(4)]
