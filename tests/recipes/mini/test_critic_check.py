"""The miniature's critic check: oracle values from the scripted human's rules, and agreement."""

from __future__ import annotations

import json
import math

import pytest

from sweet_rl.recipes.mini import critic_check as check
from sweet_rl.recipes.mini.critic_check import CriticCheckOptions, critic_check

REFERENCE = """def late_fee(days_late):
    # The fee runs 2 per day.
    FEE = 2
    # The grace period lasts 14 days.
    GRACE = 14
    # The fee never goes above 60.
    CAP = 60
    fee = max(0, days_late - GRACE) * FEE
    return min(fee, CAP)
"""
RIGHT = ("OUTPUT: I WANT TO ANSWER:\n```python\n" + REFERENCE.replace("    # The", "    # the")
         + "```")
WRONG = "OUTPUT: I WANT TO ANSWER:\n```python\n" + REFERENCE.replace("FEE = 2", "FEE = 5") + "```"


def test_oracle_values_follow_the_scripted_humans_rules():
    told_fee = "The fee runs 2 per day."
    assert check.oracle_value(RIGHT, REFERENCE, "") == check.SOLVED  # comments do not count
    assert check.oracle_value(WRONG, REFERENCE, "") == check.WRONG_ANSWER
    assert check.oracle_value("OUTPUT: What is the fee?", REFERENCE, "") == 1
    assert check.oracle_value("OUTPUT: What is the fee?", REFERENCE, told_fee) == 0  # known
    assert check.oracle_value("OUTPUT: What are the fee and the cap?", REFERENCE, told_fee) == 1
    assert check.oracle_value("OUTPUT: The grace and the cap?", REFERENCE, "") == 2
    # the human tells at most two details per reply
    assert check.oracle_value("OUTPUT: fee, grace, cap?", REFERENCE, "") == 2
    assert check.oracle_value("OUTPUT: Should I add a docstring?", REFERENCE, "") == 0
    # only the text after OUTPUT: reaches the human
    assert check.oracle_value("I need the fee. OUTPUT: Anything else?", REFERENCE, "") == 0


def test_agreement_counts_only_pairs_the_oracle_and_the_critic_both_separate():
    values = [[3, -1, 0], [1, 1]]
    judges = [[0.5, -2.0, 0.5], [0.1, 0.2]]
    result = check.agreement(values, judges)
    # turn 1: (3,-1) right; (3,0) judge tie, skipped; (-1,0) right. turn 2: oracle tie, skipped
    assert result["pairwise_accuracy"] == 1.0 and result["pairs"] == 2
    assert result["top_pick"] == (3 + 1) / 2  # first of the tied maxima, then 0.2's value 1
    assert result["best_pick"] == 2.0 and result["turns"] == 2
    flipped = check.agreement([[3, -1]], [[-1.0, 1.0]])
    assert flipped["pairwise_accuracy"] == 0.0 and flipped["top_pick"] == -1
    assert math.isnan(check.agreement([[1, 1]], [[0.0, 1.0]])["pairwise_accuracy"])


def record(outputs, judge, messages=None):
    return {"messages": messages or [{"role": "user", "content": "Write late_fee."},
                                     {"role": "assistant", "content": "OUTPUT: What is the fee?"}],
            "ground_truth": REFERENCE, "additional_outputs": outputs, "judge_result": judge}


def test_main_reads_ranked_records_and_reports_each_file(tmp_path, capsys):
    path = tmp_path / "ranked.jsonl"
    rows = [record([RIGHT, WRONG, "OUTPUT: What is the cap?"], [0.0, -1.0, -0.5]),
            record(["OUTPUT: What is the fee?", "OUTPUT: Docstring?"], [0.3, 0.1],
                   [{"role": "user", "content": "Write late_fee."},
                    {"role": "assistant", "content": "OUTPUT: What is the fee?"},
                    {"role": "user", "content": "The fee runs 2 per day."},
                    {"role": "assistant", "content": "OUTPUT: cap?"}])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = critic_check(CriticCheckOptions(ranked_paths=[str(path)]))[str(path)]
    # turn 1: 3 > -1, 3 > 1, 1 > -1 all ordered right; turn 2: both questions are worth 0
    # (the fee was told before this turn), so no pair counts
    assert result["pairs"] == 3 and result["pairwise_accuracy"] == 1.0
    assert result["top_pick"] == (3 + 0) / 2
    assert "pairwise accuracy 1.000 on 3 pairs" in capsys.readouterr().out


def test_main_names_the_file_line_and_field_of_a_bad_record(tmp_path):
    path = tmp_path / "ranked.jsonl"
    good = record(["OUTPUT: What is the fee?"], [0.0])
    bad = dict(good)
    del bad["judge_result"]
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"ranked.jsonl:2: field 'judge_result' is missing"):
        critic_check(CriticCheckOptions(ranked_paths=[str(path)]))
    short = record(["OUTPUT: a?", "OUTPUT: b?"], [0.0])
    path.write_text(json.dumps(short) + "\n")
    with pytest.raises(ValueError, match=r":1: field 'judge_result' has 1 scores for 2"):
        critic_check(CriticCheckOptions(ranked_paths=[str(path)]))
