"""The followup family's property check on a small case: scripted dialogues of every style
graded by the real grader, and step records with candidates and critic scores written out."""

import json

import pytest

from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.recipes.mini import followup_check as check
from sweet_rl.recipes.mini.followup_check import FollowupCheckOptions, followup_check
from sweet_rl.recipes.mini.followup_dialogues import (STYLES, build_followup_trajectories,
                                                      follow_up)
from sweet_rl.recipes.mini.followup_tasks import generate_tasks


@pytest.fixture(scope="module")
def graded(tmp_path_factory, tiny_model_dir):
    """Four tasks, each played once in every style (rollout j is STYLES[j]), graded."""
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.stages.evaluate_code import EvaluateCodeOptions, evaluate_code

    path = tmp_path_factory.mktemp("followup") / "offline.jsonl"
    tasks = generate_tasks(4, seed=0)
    write_jsonl(str(path), build_followup_trajectories(load_tokenizer(tiny_model_dir), tasks))
    evaluate_code(EvaluateCodeOptions(saved_path=str(path), k=len(STYLES)))
    return path, tasks


def test_answer_constants_and_details_right():
    answer = "```python\n    POSTAGE = 8\n    SURCHARGE = 3  # told\n    ZONE_3 = 20\n```"
    assert check.answer_constants(answer) == {"POSTAGE": 8, "SURCHARGE": 3, "ZONE_3": 20}
    assert check.details_right(answer, {"POSTAGE": 8, "SURCHARGE": 3, "ZONE_3": 13}) == 2
    assert check.answer_constants("X = foo(") == {"X": "foo("}


def test_offline_properties_of_the_scripted_styles(graded, tmp_path, capsys):
    path, tasks = graded
    rows = list(read_jsonl(str(path)))
    assert [t.extra["mini_details"] for t in tasks] == [
        {"POSTAGE": 10, "SURCHARGE": 2, "ZONE_2": 20},  # the usual amount: skipping passes
        {"POSTAGE": 6, "SURCHARGE": 1, "ZONE_1": 17},  # the guess gets the zone right only
        {"POSTAGE": 6, "SURCHARGE": 2, "ZONE_2": 19},
        {"POSTAGE": 12, "SURCHARGE": 4, "ZONE_4": 16}]
    assert [row["reward"] >= 1.0 for row in rows] == [
        True, True, True, True,  # thorough
        True, False, False, False,  # skipper
        False, False, False, False,  # guesser
        True, False, False, False]  # waster
    result = followup_check(FollowupCheckOptions(offline=str(path), k=4,
                                                 output_path=str(tmp_path / "p.json")))
    offline = result["offline"]
    assert offline["tasks_with_success"] == 1.0 and offline["success"] == 6 / 16
    assert offline["lucky_successes"] == 2 / 6  # the skipper's and the waster's pass
    assert offline["successes_with_wasted_turn"] == 1 / 6  # the waster's
    # near misses: three skippers and three wasters (the amount only); no guesser
    assert offline["near_miss_failures"] == 6 / 10
    # critical turns: thorough asks there (4 follow-ups); skippers and wasters answer (8)
    assert (offline["critical_turns"], offline["follow_up_rate"]) == (12, 4 / 12)
    assert json.loads((tmp_path / "p.json").read_text())["offline"] == offline
    sidecar = json.loads((tmp_path / "p.json.config.json").read_text())
    assert sidecar["stages"]["mini_followup_check"]["k"] == 4
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == ("mini_followup_check: metrics success=0.375 tasks_with_success=1.000 "
                           "lucky=0.333 near_miss=0.600")


def _records_with_candidates(rows, tasks):
    """The step records of the thorough dialogues, three candidates per turn: the follow-up,
    an answer with the usual amount and a question about nothing; scored by a critic that
    prefers the follow-up on tasks 1 and 3 and the answer on tasks 0 and 2."""
    from sweet_rl.recipes.mini.followup_dialogues import agent_turns
    from sweet_rl.records import Trajectory
    from sweet_rl.stepwise.turns import turn_records

    records = []
    for index, task in enumerate(tasks):
        zone = task.extra["mini_details"]["SURCHARGE"]
        skip = agent_turns(task, "skipper")[-1]
        for step in turn_records(Trajectory.from_dict(rows[index])):
            record = step.to_dict()
            record["additional_outputs"] = [follow_up(zone), skip,
                                            "Let me see. OUTPUT: Is speed important?"]
            record["judge_result"] = [0.9, 0.1, 0.0] if index % 2 else [0.1, 0.9, 0.0]
            records.append(record)
    return records


def test_candidates_and_critic_at_critical_turns(graded, tmp_path):
    path, tasks = graded
    records = _records_with_candidates(list(read_jsonl(str(path))), tasks)
    assert len(records) == 16  # four turns of each thorough dialogue
    write_jsonl(str(tmp_path / "sampled.jsonl"), records)
    write_jsonl(str(tmp_path / "ranked.jsonl"), records)
    result = followup_check(FollowupCheckOptions(sampled=str(tmp_path / "sampled.jsonl"),
                                                 ranked=[str(tmp_path / "ranked.jsonl")]))
    # one critical turn per dialogue: the third, after the zone was told
    assert result["sampled"] == {"critical_turns": 4, "candidates_per_turn": 3.0,
                                 "follow_up_share": 1 / 3, "turns_containing_follow_up": 1.0}
    critic = result[str(tmp_path / "ranked.jsonl")]
    assert critic["turns"] == 4 and critic["top_is_follow_up"] == 2 / 4
    # the oracle: on task 0 the usual amount is right, so answering at once is best there;
    # on task 2 the answer is wrong
    assert critic["top_is_oracle_best"] == 3 / 4
    assert critic["random_is_oracle_best"] == 1 / 3


def test_bad_input_is_refused_with_file_and_line(tmp_path, graded):
    path, _ = graded
    rows = list(read_jsonl(str(path)))
    del rows[2]["reward"]
    write_jsonl(str(tmp_path / "bad.jsonl"), rows)
    with pytest.raises(ValueError, match="bad.jsonl:3: field 'reward'"):
        followup_check(FollowupCheckOptions(offline=str(tmp_path / "bad.jsonl"), k=4))
    with pytest.raises(ValueError, match="not a whole number of --k 3"):
        followup_check(FollowupCheckOptions(offline=str(path), k=3))
    write_jsonl(str(tmp_path / "sampled.jsonl"), [{"messages": [], "ground_truth": ""}])
    with pytest.raises(ValueError, match="sampled.jsonl:1: field 'additional_outputs'"):
        followup_check(FollowupCheckOptions(sampled=str(tmp_path / "sampled.jsonl"),
                                            output_path=str(tmp_path / "out.json")))
    assert not (tmp_path / "out.json").exists()
    with pytest.raises(ValueError, match="give --offline, --sampled or --ranked"):
        FollowupCheckOptions()
