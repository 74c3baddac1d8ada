"""Frontend trajectory pairs (reward gap threshold) and win rate, on hand-worked examples.

Rows follow the simulate layout: with T tasks, row ``i + j*T`` is rollout j of task i.
"""

import pytest

from sweet_rl.evaluation.preferences import best_of_k, threshold_pairs, win_rate


def test_pairs_two_tasks_k2():
    # task 0: rows 0 (0.9) and 2 (0.7): gap 0.2 -> row 0 chosen over row 2
    # task 1: rows 1 (0.5) and 3 (0.55): gap 0.05 < 0.1 -> no pair
    assert threshold_pairs([0.9, 0.5, 0.7, 0.55], k=2, threshold=0.1) == [(0, 2)]


def test_higher_reward_is_chosen_whichever_rollout_it_is():
    assert threshold_pairs([0.2, 0.9], k=2) == [(1, 0)]
    assert threshold_pairs([0.9, 0.2], k=2) == [(0, 1)]


def test_every_pair_of_rollouts_of_a_task_k3():
    # One task, rollouts 0.2, 0.9, 0.5:
    #   (0,1) gap 0.7 -> 1 over 0;  (0,2) gap 0.3 -> 2 over 0;  (1,2) gap 0.4 -> 1 over 2.
    assert threshold_pairs([0.2, 0.9, 0.5], k=3) == [(1, 0), (2, 0), (1, 2)]


def test_layout_i_plus_j_times_num_tasks_k3():
    # Two tasks, three rollouts: task a = rows 0, 2, 4 -> 0.1, 0.6, 0.15
    #                            task b = rows 1, 3, 5 -> 0.8, 0.8, 0.2
    # a: (0,2) gap 0.5 -> (2,0); (0,4) gap 0.05 -> none; (2,4) gap 0.45 -> (2,4)
    # b: (1,3) equal -> none;    (1,5) gap 0.6 -> (1,5); (3,5) gap 0.6 -> (3,5)
    rewards = [0.1, 0.8, 0.6, 0.8, 0.15, 0.2]
    assert threshold_pairs(rewards, k=3) == [(2, 0), (2, 4), (1, 5), (3, 5)]


def test_threshold_boundary_is_included():
    # 0.3 - 0.2 is 0.09999999999999998 in floating point; a gap of 0.1 still counts.
    assert 0.3 - 0.2 < 0.1
    assert threshold_pairs([0.3, 0.2], k=2, threshold=0.1) == [(0, 1)]
    assert threshold_pairs([0.75, 0.65], k=2, threshold=0.1) == [(0, 1)]
    # Just below the threshold: no pair.
    assert threshold_pairs([0.3, 0.2001], k=2, threshold=0.1) == []
    assert threshold_pairs([0.3, 0.21], k=2, threshold=0.1) == []
    # A larger threshold drops the smaller gaps of the k=3 example above.
    assert threshold_pairs([0.2, 0.9, 0.5], k=3, threshold=0.4) == [(1, 0), (1, 2)]


def test_equal_rewards_never_pair_even_at_threshold_zero():
    assert threshold_pairs([0.5, 0.5], k=2, threshold=0.0) == []
    assert threshold_pairs([0.5, 0.51], k=2, threshold=0.0) == [(1, 0)]


def test_k1_gives_no_pairs_and_bad_arguments_are_refused():
    assert threshold_pairs([0.1, 0.9, 0.4], k=1) == []
    with pytest.raises(ValueError, match="k=2"):
        threshold_pairs([0.1, 0.9, 0.4], k=2)
    with pytest.raises(ValueError, match="threshold"):
        threshold_pairs([0.1, 0.9], k=2, threshold=-0.1)


def test_win_rate_ties_count_half():
    # win (0.9 > 0.8), tie (0.5 = 0.5), loss (0.7 < 0.75): (1 + 0.5 + 0) / 3 = 0.5
    assert win_rate([0.9, 0.5, 0.7], [0.8, 0.5, 0.75]) == pytest.approx(0.5)
    # win, win, tie, loss: (1 + 1 + 0.5 + 0) / 4 = 0.625
    assert win_rate([0.9, 0.6, 0.4, 0.1], [0.2, 0.5, 0.4, 0.3]) == pytest.approx(0.625)


def test_win_rate_against_itself_is_one_half():
    scores = [0.3, 0.72, 0.9]
    assert win_rate(scores, scores) == 0.5  # the paper's GPT-4o row (50.0) compares it with itself


def test_win_rate_of_best_of_k_against_a_single_rollout_run():
    # Ours, k=2 over tasks t0 (rows 0, 2) and t1 (rows 1, 3): best 0.9 and 0.4.
    # Theirs, k=1: 0.8 and 0.4.  t0 win, t1 tie -> (1 + 0.5) / 2 = 0.75.
    ours = best_of_k([0.6, 0.4, 0.9, 0.3], 2)
    assert ours == [0.9, 0.4]
    assert win_rate(ours, best_of_k([0.8, 0.4], 1)) == pytest.approx(0.75)
    # The other way round the shares add up to one: 0.25.
    assert win_rate(best_of_k([0.8, 0.4], 1), ours) == pytest.approx(0.25)


def test_win_rate_needs_the_same_tasks():
    with pytest.raises(ValueError, match="same tasks"):
        win_rate([0.1, 0.2], [0.1])
    with pytest.raises(ValueError):
        win_rate([], [])
