"""The followup family of the miniature: seeded tasks, splits, a detail only a follow-up
question reveals, usual values that are sometimes right, its scripted styles and drills, and
the family sets the recipes read (pure logic, plus one small grading run)."""

import math

import pytest

from sweet_rl.recipes.mini import followup_tasks as followup
from sweet_rl.recipes.mini.followup_dialogues import (STYLES, agent_turns, build_followup_drills,
                                                   drill_details, follow_up)
from sweet_rl.recipes.mini.tasks import MIN_FAILS, _function, one_wrong_variants
from sweet_rl.environments.protocol import answer_text, parse_agent_output
from sweet_rl.grading.code_extraction import extract_code
from sweet_rl.simulators.scripted_simulator import UNHELPFUL_REPLY, reply_to


def _outputs(code, task):
    function = _function(code)
    return [eval(expr, {function.__name__: function}) for expr in task.test_cases.values()]


def _internal(task):
    """The generator's values (POSTAGE, SURCHARGE, AMOUNT) of a task."""
    details = task.extra["mini_details"]
    zone = details["SURCHARGE"]
    return {"POSTAGE": details["POSTAGE"], "SURCHARGE": zone, "AMOUNT": details[f"ZONE_{zone}"]}


def _prompt(task, question):
    """What the scripted human reads: the hidden reference, then the agent's last turn (the
    environment's transcript layout)."""
    from sweet_rl.environments.base import SIMULATOR_CUE, TURN_SEPARATOR

    return (f"hidden:\n{task.ground_truth}\n{TURN_SEPARATOR}assistant:{question}"
            f"{TURN_SEPARATOR}{SIMULATOR_CUE}")


def test_literal_task_for_seed_zero():
    [task] = followup.generate_tasks(1, seed=0)
    assert task.problem_description == (
        "Write a function that gives the cost of sending a parcel from its weight in kilograms "
        "and its zone. I have a postage, a surcharge and its amount in mind; usually the "
        "postage is 5, zone 1 pays the surcharge, and it costs 20 more. The signature of the "
        "function is: def parcel_cost(kilograms, zone)")
    assert task.ground_truth == (
        "def parcel_cost(kilograms, zone):\n"
        "    # The postage starts at 10.\n"
        "    POSTAGE = 10\n"
        "    # The surcharge goes to zone 2.\n"
        "    SURCHARGE = 2\n"
        "    # Zone 2 adds 20.\n"
        "    ZONE_2 = 20\n"
        "    cost = POSTAGE + kilograms\n"
        "    if zone == SURCHARGE:\n"
        "        cost = cost + ZONE_2\n"
        "    return cost\n")
    assert task.extra == {"mini_family": "followup",
                          "mini_details": {"POSTAGE": 10, "SURCHARGE": 2, "ZONE_2": 20}}
    assert list(task.test_cases.values()) == [
        "parcel_cost(12, 1)", "parcel_cost(24, 3)", "parcel_cost(11, 2)", "parcel_cost(19, 2)",
        "parcel_cost(18, 4)", "parcel_cost(7, 3)", "parcel_cost(17, 4)", "parcel_cost(22, 3)",
        "parcel_cost(14, 0)", "parcel_cost(20, 2)"]
    assert _outputs(task.ground_truth, task) == [22, 34, 41, 49, 28, 17, 27, 32, 24, 50]


def test_the_same_seed_gives_the_same_tasks_and_splits_keep_apart():
    first = [t.to_dict() for t in followup.generate_tasks(6, seed=3)]
    assert first == [t.to_dict() for t in followup.generate_tasks(6, seed=3)]
    assert first != [t.to_dict() for t in followup.generate_tasks(6, seed=4)]
    assert [t.to_dict() for t in followup.generate_tasks(3, seed=3)] == first[:3]
    pools = {split: {tuple(sorted(v.items())) for v in followup.split_pool(split)}
             for split in followup.SPLITS}
    assert [len(pools[s]) for s in followup.SPLITS] == [182, 26, 50]
    usual = {tuple(sorted(followup.usual_values().items()))}
    # only the combination with every detail usual is in more than one split
    assert pools["train"] & pools["test"] == pools["train"] & pools["valid"] == usual
    assert pools["valid"] & pools["test"] == usual
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        followup.split_pool("dev")


def test_about_three_in_ten_hidden_values_are_the_usual_ones():
    tasks = followup.generate_tasks(200, seed=1)
    usual = followup.usual_values()
    counts = [sum(_internal(t)[name] == value for t in tasks) for name, value in usual.items()]
    assert counts == [58, 72, 49]  # of 200: 0.29, 0.36, 0.25


def test_one_wrong_detail_fails_at_least_three_tests():
    for task in followup.generate_tasks(12, seed=2) + followup.generate_tasks(6, 2, "test"):
        reference = _outputs(task.ground_truth, task)
        assert followup.FAMILY.code(_internal(task)) == task.ground_truth
        for variant in one_wrong_variants(followup.FAMILY, _internal(task)):
            got = _outputs(followup.FAMILY.code(variant), task)
            assert sum(a != b for a, b in zip(reference, got)) >= MIN_FAILS, variant


def test_the_scripted_human_tells_the_amount_only_to_a_question_naming_the_zone():
    [task] = followup.generate_tasks(1, seed=0)  # zone 2 adds 20
    assert reply_to(_prompt(task, " What is the surcharge?")) == "The surcharge goes to zone 2."
    assert reply_to(_prompt(task, " What does zone 2 add?")) == "Zone 2 adds 20."
    assert reply_to(_prompt(task, " What is the postage?")) == "The postage starts at 10."
    for generic in (" What does the surcharge add?", " What is the amount?",
                    " What does the zone add?", " What does zone 1 add?", " Anything else?"):
        assert "adds" not in reply_to(_prompt(task, generic)), generic
    assert reply_to(_prompt(task, " What is the amount?")) == UNHELPFUL_REPLY
    assert follow_up(2) == "I still need to know what it adds. OUTPUT: What does zone 2 add?"


def test_styles_follow_the_protocol_within_the_turn_limit(tmp_path):
    from sweet_rl.data.offline_demo import code_answer
    from sweet_rl.grading.grader import Grader

    tasks = followup.generate_tasks(6, seed=0)
    items, expected = [], []
    for task in tasks:
        lucky = _internal(task) == followup.usual_values()
        amount_usual = _internal(task)["AMOUNT"] == followup.usual_values()["AMOUNT"]
        for style in STYLES:
            turns = [parse_agent_output(raw) for raw in agent_turns(task, style)]
            assert len(turns) <= followup.MAX_TURNS
            assert turns[-1].is_answer and not any(t.is_answer for t in turns[:-1])
            code = extract_code(answer_text(turns[-1].message))
            items.append((code_answer(code), task.ground_truth, task.test_cases))
            expected.append({"thorough": True, "skipper": amount_usual, "waster": amount_usual,
                             "guesser": lucky}[style])
    results = Grader("benchmark", timeout=1.0, scratch_root=str(tmp_path)).grade(items)
    assert [r.reward == 1.0 for r in results] == expected
    assert expected.count(True) == 12  # 6 thorough; three tasks have the usual amount


def test_drills_write_the_family_constants_among_the_basic_ones():
    from sweet_rl.recipes.mini.drills import drill
    import random

    pools = drill_details()
    assert {"POSTAGE", "SURCHARGE", "AMOUNT", "FEE", "THRESHOLD"} <= set(pools)
    assert [d.name for d in pools["AMOUNT"]] == ["ZONE_1", "ZONE_2", "ZONE_3", "ZONE_4"]
    assert "ROUNDING" not in pools and "CASE" not in pools  # the family has no strings
    message, output = drill(random.Random(5), pools=pools)
    assert message.count(".") == output.count("#") and "OUTPUT: ```python" in output
    assert len(build_followup_drills(None, 0)) == 0


def test_the_family_sets_name_each_family_s_styles_turns_and_splits():
    from sweet_rl.recipes.mini import dialogues, followup_dialogues
    from sweet_rl.recipes.mini.family_sets import FAMILY_SETS, build_dialogues, family_set
    from sweet_rl.recipes.mini.styles import assign_styles, parse_mix

    assert FAMILY_SETS["basic"].styles == dialogues.STYLES
    assert FAMILY_SETS["followup"].styles == followup_dialogues.STYLES
    assert FAMILY_SETS["followup"].max_turns == followup.MAX_TURNS == 4
    assert FAMILY_SETS["followup"].splits == followup.SPLITS
    assert build_dialogues("followup") is followup_dialogues.build_followup_trajectories
    assert build_dialogues("basic") is dialogues.build_mini_trajectories
    with pytest.raises(ValueError, match="--family \\(FAMILY\\) must be one of basic, followup"):
        family_set("folowup")
    mix = parse_mix(FAMILY_SETS["followup"].mix, FAMILY_SETS["followup"].styles)
    assert sorted(assign_styles(20, mix, 0, STYLES)) == sorted(
        ["thorough"] * 7 + ["skipper"] * 6 + ["guesser"] * 4 + ["waster"] * 3)
    with pytest.raises(ValueError, match="unknown style 'asker'"):
        parse_mix("asker=1", STYLES)


def test_run_settings_refuse_what_the_family_cannot_do():
    from sweet_rl.recipes.mini.settings import RunSettings

    assert RunSettings(family="followup").shares() == (
        "thorough=0.35,skipper=0.3,guesser=0.2,waster=0.15")
    assert RunSettings().max_turns() == 10 and RunSettings(family="followup").max_turns() == 4
    for bad, match in (({"family": "followup", "mix": "asker=1"}, "unknown style 'asker'"),
                       ({"split": "valid"}, "needs --family followup"),
                       ({"split": "dev"}, "must be test or valid"),
                       ({"match_steps": True, "methods": ["rft"]}, "needs sweet"),
                       ({"fractions": ["3/2"]}, "--fraction must be in"),
                       ({"family": "basics"}, "must be one of")):
        with pytest.raises(ValueError, match=match):
            RunSettings(**bad)
    RunSettings(family="followup", valid_tasks=5, split="valid", fractions=["1/3", "0.5"],
                match_steps=True)


def test_matched_steps_arithmetic(tmp_path):
    from sweet_rl.recipes.mini.steps import epochs_for, rows_in, updates, updates_per_epoch

    path = tmp_path / "rows.jsonl"
    path.write_text('{"reward": 1.0}\n{"reward": 0.5}\n\n{"reward": 1}\n')
    assert rows_in(str(path)) == 3 and rows_in(str(path), min_reward=1.0) == 2
    assert [updates_per_epoch(n) for n in (1, 8, 9, 17)] == [1, 1, 2, 3]
    assert updates_per_epoch(17, micro=2) == 3 and updates(17, 2) == 6
    # the trainer makes ceil(epochs x updates per epoch) updates: exactly the target
    for rows, target in ((17, 5), (3, 4), (40, 1)):
        assert math.ceil(epochs_for(rows, target) * updates_per_epoch(rows)) == target
    with pytest.raises(ValueError, match="at least one update"):
        epochs_for(10, 0)
