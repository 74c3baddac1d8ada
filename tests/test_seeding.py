"""The one seed-derivation rule (sweet_rl.seeding), pinned to literal values."""

from sweet_rl.seeding import MODULUS, candidate_seeds, derive_seed, row_seed, turn_seed


def test_one_step_is_parent_times_1_000_003_plus_index_mod_2_31():
    assert derive_seed(0, 9) == 9
    assert derive_seed(42, 7) == 42_000_133
    assert derive_seed(3, 4, 5) == 2_134_827_436  # two steps: (3 * P + 4) * P + 5 mod 2**31
    assert derive_seed(3, 4, 5) == derive_seed(derive_seed(3, 4), 5)
    assert derive_seed(12345) == 12345  # no index: the parent itself


def test_values_stay_in_0_to_2_31():
    assert derive_seed(-1, 0) == 2_146_483_645  # a negative parent wraps first
    assert derive_seed(2 ** 40, 1) == 1  # 2**40 is 0 mod 2**31
    assert all(0 <= derive_seed(s, i) < MODULUS for s in (-7, 0, 2 ** 31 - 1, 10 ** 15)
               for i in (0, 1, 10 ** 6))


def test_rows_turns_and_candidates_use_the_one_rule():
    assert [row_seed(0, r) for r in range(4)] == [0, 1, 2, 3]
    assert row_seed(3, 2) == 3_000_011
    # earlier record seeds were (seed * 1_000_003 + index) % 2**31: resumed outputs keep them
    assert row_seed(123_456, 789) == (123_456 * 1_000_003 + 789) % 2 ** 31 == 1_049_803_221
    assert turn_seed(5, 3) == 5_000_018
    assert turn_seed(row_seed(1, 2), 0) == derive_seed(1, 2, 0) == 1_428_103_695
    assert candidate_seeds(7, 3) == [7_000_021, 7_000_022, 7_000_023]
    assert candidate_seeds(7, 0) == []


def test_distinct_rows_and_turns_get_distinct_seeds():
    seeds = {turn_seed(row_seed(42, r), t) for r in range(200) for t in range(10)}
    assert len(seeds) == 2000
