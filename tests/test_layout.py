"""The row layout of trajectory files: row i + j*num_tasks is rollout j of task i."""

from types import SimpleNamespace

import pytest

from sweet_rl.layout import (check_rollout_layout, lay_out, place, rollout_matrix, rollout_of,
                             row_matrix, row_of, task_count, task_of)
from sweet_rl.records import RecordError


def _rows(*descriptions):
    return [SimpleNamespace(task=SimpleNamespace(problem_description=d)) for d in descriptions]


def test_row_of_and_back():
    # 3 tasks: rollout 0 fills rows 0-2, rollout 1 rows 3-5
    assert row_of(0, 0, 3) == 0
    assert row_of(2, 0, 3) == 2
    assert row_of(0, 1, 3) == 3
    assert row_of(1, 1, 3) == 4
    assert row_of(2, 3, 3) == 11
    assert task_of(4, 3) == 1 and rollout_of(4, 3) == 1
    assert place(11, 3) == (2, 3)
    assert [place(row, 3) for row in range(6)] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    for row in range(12):
        assert row_of(*place(row, 3), 3) == row


def test_lay_out_repeats_the_task_list():
    assert lay_out(["a", "b", "c"], 2) == ["a", "b", "c", "a", "b", "c"]
    assert lay_out(["a"], 3) == ["a", "a", "a"]
    assert lay_out(["a", "b"], 1) == ["a", "b"]
    assert lay_out([], 4) == []


def test_row_matrix_and_rollout_matrix():
    assert row_matrix(6, 2) == [[0, 3], [1, 4], [2, 5]]
    assert row_matrix(6, 3) == [[0, 2, 4], [1, 3, 5]]
    assert row_matrix(4, 1) == [[0], [1], [2], [3]]
    assert row_matrix(0, 2) == []
    assert rollout_matrix([0.9, 0.5, 0.7, 0.55], 2) == [[0.9, 0.7], [0.5, 0.55]]
    assert rollout_matrix(["a0", "b0", "a1", "b1", "a2", "b2"], 3) == [["a0", "a1", "a2"],
                                                                      ["b0", "b1", "b2"]]


def test_task_count_refuses_a_ragged_split():
    assert task_count(6, 2) == 3
    assert task_count(0, 5) == 0
    with pytest.raises(ValueError, match="5 trajectories cannot be split into k=2"):
        task_count(5, 2)
    with pytest.raises(ValueError, match="k=0"):
        task_count(4, 0)
    with pytest.raises(ValueError, match="cannot be split"):
        rollout_matrix([0.1, 0.2, 0.3], 2)


def test_check_rollout_layout_accepts_the_simulate_order():
    check_rollout_layout("f.jsonl", _rows("a", "b", "a", "b"), 2)
    check_rollout_layout("f.jsonl", _rows("a", "a"), 1)  # one rollout: any order is a layout


def test_check_rollout_layout_names_the_first_misplaced_row():
    # grouped by task (a, a, b, b) instead of by rollout: line 3 (rollout 1 of task 1) holds "b"
    with pytest.raises(RecordError) as err:
        check_rollout_layout("f.jsonl", _rows("a", "a", "b", "b"), 2)
    assert str(err.value) == (
        "f.jsonl, line 3: field 'task.problem_description' differs from "
        "row 1 (rows i + j*num_tasks must hold the same task; is --k 2 right?)"
    )
    with pytest.raises(RecordError, match="line 6: .* differs from row 3 .*--k 2"):
        check_rollout_layout("f.jsonl", _rows("a", "b", "c", "a", "b", "x"), 2)


def test_check_rollout_layout_refuses_bad_k_and_ragged_files():
    with pytest.raises(RecordError, match="has 3 trajectories, not a multiple of --k 2"):
        check_rollout_layout("f.jsonl", _rows("a", "b", "a"), 2)
    with pytest.raises(ValueError, match="--k must be at least 1, got 0"):
        check_rollout_layout("f.jsonl", _rows("a"), 0)
