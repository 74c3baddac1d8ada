import json

import pytest

from sweet_rl.records import PreferencePair, RecordError, StepSample, Task, Trajectory


def _trajectory_dict():
    return {
        "task": {"problem_description": "write f", "ground_truth": "def f(): return 1",
                 "test_cases": {"test1": "f()"}, "hidden_information": "def f(): return 1"},
        "dialogue_history": [
            {"role": "user", "content": "write f"},
            {"role": "assistant", "content": "I WANT TO ANSWER: def f(): return 1",
             "input": "<prompt>", "output": "thinking OUTPUT: I WANT TO ANSWER: def f(): return 1",
             "turn_note": "kept"},
        ],
        "answer": "def f(): return 1",
        "reward": 1.0,
        "custom_key": {"nested": [1, 2]},
    }


def test_trajectory_round_trip_keeps_unknown_keys():
    data = _trajectory_dict()
    traj = Trajectory.from_dict(data)
    assert traj.task.hidden_information == "def f(): return 1"
    assert traj.dialogue_history[1].extra == {"turn_note": "kept"}
    assert json.dumps(traj.to_dict(), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_unevaluated_trajectory_has_no_reward_key():
    data = _trajectory_dict()
    del data["reward"]
    assert "reward" not in Trajectory.from_dict(data).to_dict()


def test_missing_nested_field_is_named():
    data = _trajectory_dict()
    del data["dialogue_history"][1]["content"]
    with pytest.raises(RecordError) as err:
        Trajectory.from_dict(data)
    assert err.value.field == "dialogue_history[1].content"
    assert "dialogue_history[1].content" in str(err.value)


def test_wrong_type_is_named():
    with pytest.raises(RecordError, match="field 'task.test_cases.test1'"):
        Trajectory.from_dict({**_trajectory_dict(), "task": {
            "problem_description": "p", "ground_truth": "g", "test_cases": {"test1": 3}}})
    with pytest.raises(RecordError, match="field 'ground_truth': expected str, got int"):
        Task.from_dict({"problem_description": "p", "ground_truth": 5})


def test_step_sample_lengths_must_agree():
    row = {"input": "i", "input_with_ground_truth": "gi", "older_output": "o", "reward": 1,
           "ground_truth": "g", "messages": [], "additional_outputs": ["a", "b"],
           "additional_reference_logprobs": [-1.0, -2.0],
           "additional_reference_logprobs_sum": [-3.0]}
    with pytest.raises(RecordError, match="additional_reference_logprobs_sum"):
        StepSample.from_dict(row)
    row["additional_reference_logprobs_sum"] = [-3.0, -4.0]
    assert StepSample.from_dict(row).to_dict() == {**row, "reward": 1.0}


def test_preference_pair_prompt_is_optional():
    assert PreferencePair.from_dict({"chosen": "a", "rejected": "b"}).to_dict() == {
        "chosen": "a",
        "rejected": "b",
    }
    pair = PreferencePair.from_dict({"prompt": "p", "chosen": "a", "rejected": "b", "score": 2})
    assert pair.to_dict() == {"chosen": "a", "rejected": "b", "prompt": "p", "score": 2}


def test_preference_pairs_accept_input_output_objects():
    # the original's frontend critic pairs: {"input": ..., "output": ...} sides,
    # text = input + output
    pair = PreferencePair.from_dict({"chosen": {"input": "In light.P", "output": "good"},
                                     "rejected": {"input": "In light.P", "output": "bad"}})
    assert (pair.chosen, pair.rejected, pair.prompt) == ("In light.Pgood", "In light.Pbad", None)
    with pytest.raises(RecordError) as err:
        PreferencePair.from_dict({"chosen": {"input": "P"}, "rejected": "b"})
    assert err.value.field == "chosen.output"
    with pytest.raises(RecordError) as err:
        PreferencePair.from_dict({"chosen": "a", "rejected": {"input": None, "output": "b"}})
    assert err.value.field == "rejected.input"
