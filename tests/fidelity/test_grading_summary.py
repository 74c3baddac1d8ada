"""The original evaluation's summary lines, number for number.

The published evaluate_code prints ``Average correctness`` with Python's ``sum(...)/len(...)``
(left to right) over all rows, and ``Best-of-k Average correctness`` with ``numpy.mean`` over
the best-of-k rewards, which sums pairwise: the two can differ in the last digit, and scripts
that parse the lines see exactly those digits.
"""

import random

import pytest

from sweet_rl.stages.evaluate_code import numpy_mean, original_summary


def test_lines_in_the_original_format():
    # rows laid out i + j*num_tasks: task 0 has rollouts 1.0 and 0.1, task 1 has 0.5 and 0.2.
    # All rows: (1.0 + 0.5 + 0.1 + 0.2) / 4 = 0.45, one row of four at 1 -> 0.25;
    # best-of-2: [1.0, 0.5] -> mean 0.75, one task of two at 1 -> 0.5.
    assert original_summary([1.0, 0.5, 0.1, 0.2], [1.0, 0.5], 2, 3) == [
        "Average correctness: 0.45", "Number of trajectories: 4",
        "Percentage of correct trajectories: 0.25", "Best-of-2 Average correctness: 0.75",
        "Best-of-2 percentage of correct trajectories: 0.5", "Number of preference pairs: 3"]


def test_sum_and_numpy_mean_differ_as_in_the_original():
    # ten rewards of 0.1: a left-to-right sum gives 0.9999999999999999, so the first line
    # prints 0.09999999999999999; numpy's pairwise sum gives 1.0, so the best-of-1 line 0.1
    lines = original_summary([0.1] * 10, [0.1] * 10, 1)
    assert lines[0] == "Average correctness: 0.09999999999999999"
    assert lines[3] == "Best-of-1 Average correctness: 0.1"
    assert len(lines) == 5  # no pairs line when no pairs were written


def test_numpy_mean_is_numpys():
    np = pytest.importorskip("numpy")
    rng = random.Random(0)
    for count in list(range(1, 140)) + [255, 256, 257, 1000, 8191, 8192, 8193, 20000]:
        values = [rng.choice([0.0, 0.1, 0.2, 1 / 3, 0.7, 0.9, 1.0]) for _ in range(count)]
        assert numpy_mean(values) == float(np.mean(np.array(values))), count
