"""The miniature ColBench: seeded tasks, disjoint splits, tests that tell every hidden detail
apart, and the scripted dialogues of mixed quality (pure logic, plus one small grading run)."""

from sweet_rl.recipes.mini.dialogues import (IRRELEVANT_QUESTIONS, STYLES, agent_turns,
                                          wasted_question)
from sweet_rl.recipes.mini.tasks import (FAMILIES, FAMILY_BY_NAME, KEYWORDS, MIN_FAILS, _function,
                                      generate_tasks, one_wrong_variants, split_pool, task_key)
from sweet_rl.environments.protocol import answer_text, parse_agent_output
from sweet_rl.grading.code_extraction import extract_code
from sweet_rl.simulators.scripted_simulator import names


def _outputs(code, task):
    function = _function(code)
    return [eval(expr, {function.__name__: function}) for expr in task.test_cases.values()]


def test_the_same_seed_gives_the_same_tasks_and_another_seed_others():
    first = [t.to_dict() for t in generate_tasks(6, seed=3)]
    assert first == [t.to_dict() for t in generate_tasks(6, seed=3)]
    assert first != [t.to_dict() for t in generate_tasks(6, seed=4)]
    assert [t.to_dict() for t in generate_tasks(3, seed=3)] == first[:3]  # prefix-stable


def test_train_and_test_splits_share_no_task():
    train = {(f.name, tuple(sorted(v.items()))) for f, v in split_pool("train")}
    test = {(f.name, tuple(sorted(v.items()))) for f, v in split_pool("test")}
    assert len(train) >= 240 and len(test) >= 50 and not train & test
    assert {f.name for f, _ in split_pool("test")} == {f.name for f in FAMILIES}
    drawn = {task_key(t) for t in generate_tasks(40, seed=1, split="train")}
    held_out = {task_key(t) for t in generate_tasks(40, seed=1, split="test")}
    assert len(drawn) == 40 and not drawn & held_out  # no repeats while the pool lasts


def test_tasks_are_colbench_shaped_and_the_guess_is_never_hidden():
    for task in generate_tasks(12, seed=0):
        family = FAMILY_BY_NAME[task.extra["mini_family"]]
        assert task.problem_description.endswith(
            f"The signature of the function is: {family.signature}")
        assert task.ground_truth.startswith(family.signature + ":")
        assert len(task.test_cases) == 10 and len(set(task.test_cases.values())) == 10
        assert 2 <= len(family.details) <= 3
        assert None not in _outputs(task.ground_truth, task)
        for detail in family.details:
            assert task.extra["mini_details"][detail.name] != detail.guess


def test_a_value_tells_which_detail_it_belongs_to():
    # disjoint option sets within a family, none of them a number of the body or the guesses
    import re

    for family in FAMILIES:
        body_numbers = {int(n) for n in re.findall(r"\d+", family.body)}
        seen = set()
        for detail in family.details:
            options = set(detail.options)
            assert not options & seen and not options & body_numbers, (family.name, detail.name)
            assert detail.guess not in options
            seen |= options


def test_one_wrong_detail_fails_at_least_three_tests():
    for task in generate_tasks(16, seed=2) + generate_tasks(8, seed=2, split="test"):
        family = FAMILY_BY_NAME[task.extra["mini_family"]]
        reference = _outputs(task.ground_truth, task)
        for variant in one_wrong_variants(family, task.extra["mini_details"]):
            got = _outputs(family.code(variant), task)
            assert sum(a != b for a, b in zip(reference, got)) >= MIN_FAILS, variant


def test_literal_task_for_seed_zero():
    [task] = generate_tasks(1, seed=0)
    assert task.problem_description == (
        "Write a function that works out the fee for returning a library book late. I have a "
        "fee per day, a grace period and a cap in mind. The signature of the function is: "
        "def late_fee(days_late)")
    assert task.ground_truth == (
        "def late_fee(days_late):\n"
        "    # The fee runs 2 per day.\n"
        "    FEE = 2\n"
        "    # The grace period lasts 14 days.\n"
        "    GRACE = 14\n"
        "    # The fee never goes above 60.\n"
        "    CAP = 60\n"
        "    fee = max(0, days_late - GRACE) * FEE\n"
        "    return min(fee, CAP)\n")
    assert list(task.test_cases.values()) == [
        "late_fee(20)", "late_fee(40)", "late_fee(52)", "late_fee(59)", "late_fee(25)",
        "late_fee(42)", "late_fee(38)", "late_fee(48)", "late_fee(43)", "late_fee(44)"]
    assert _outputs(task.ground_truth, task) == [12, 52, 60, 60, 22, 56, 48, 60, 58, 60]


def test_the_grader_passes_the_reference_and_fails_a_wrong_detail(tmp_path):
    from sweet_rl.data.offline_demo import code_answer
    from sweet_rl.grading.grader import Grader

    tasks = generate_tasks(2, seed=5)
    items = []
    for task in tasks:
        family = FAMILY_BY_NAME[task.extra["mini_family"]]
        wrong = one_wrong_variants(family, task.extra["mini_details"])[0]
        items += [(code_answer(task.ground_truth), task.ground_truth, task.test_cases),
                  (code_answer(family.code(wrong)), task.ground_truth, task.test_cases)]
    results = Grader("benchmark", timeout=1.0, scratch_root=str(tmp_path)).grade(items)
    assert [r.reward for r in results[0::2]] == [1.0, 1.0]
    assert all(r.total - r.passed >= MIN_FAILS for r in results[1::2]), results


def test_scripted_dialogues_follow_the_protocol_and_differ_in_quality():
    for task in generate_tasks(8, seed=0):
        family = FAMILY_BY_NAME[task.extra["mini_family"]]
        reference = _outputs(task.ground_truth, task)
        failed = {}
        for style in STYLES:
            turns = [parse_agent_output(raw) for raw in agent_turns(task, style)]
            assert turns[-1].is_answer and not any(t.is_answer for t in turns[:-1])
            code = extract_code(answer_text(turns[-1].message))
            failed[style] = sum(a != b for a, b in zip(reference, _outputs(code, task)))
            asked = [k for k in KEYWORDS if any(names(t.message, k) for t in turns[:-1])]
            if style == "asker":
                assert code.strip() == task.ground_truth.strip()
                assert sorted(asked) == sorted(d.keyword for d in family.details)
                assert len(turns) == len(family.details) + 1
        assert failed["asker"] == 0
        assert failed["guesser"] >= MIN_FAILS and failed["waster"] >= MIN_FAILS


def test_wasted_questions_name_no_detail():
    for text in IRRELEVANT_QUESTIONS:
        message = parse_agent_output(wasted_question(text)).message
        assert not any(names(message, keyword) for keyword in KEYWORDS), text


def test_more_tasks_than_the_pool_holds_redraws_without_failing():
    # 320 train tasks draw hidden-value combinations (245) a second time with new test inputs;
    # with earlier option sets one such redraw found no ten telling tests in its first pool
    tasks = generate_tasks(320, 0, "train")
    assert len(tasks) == 320 and len(split_pool("train")) < 320
    assert all(len(task.test_cases) == 10 for task in tasks)
    again = generate_tasks(320, 0, "train")
    assert [t.test_cases for t in tasks[-5:]] == [t.test_cases for t in again[-5:]]


def test_a_family_subset_keeps_its_split_and_refuses_unknown_names():
    import pytest

    from sweet_rl.recipes.mini.tasks import corpus, select_families

    for split in ("train", "test"):
        whole = [(f.name, v) for f, v in split_pool(split) if f.name == "late_fee"]
        assert [(f.name, v) for f, v in split_pool(split, ["late_fee"])] == whole
    assert (len(split_pool("train", "late_fee")), len(split_pool("test", "late_fee"))) == (135, 33)
    tasks = generate_tasks(40, seed=2, split="test", families=["late_fee", "grade"])
    assert {t.extra["mini_family"] for t in tasks} == {"late_fee", "grade"}
    assert not any("discount" in text for text in corpus(["late_fee"]))
    assert any("discount" in text for text in corpus())
    with pytest.raises(ValueError, match="unknown families \\['fees'\\]"):
        select_families(["late_fee", "fees"])
