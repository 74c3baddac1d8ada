"""The scripted human: it answers the hidden details a question names, from the messages the
real backend environment builds, the same way every time, and never with code."""

import json
import subprocess
import sys

import pytest

from sweet_rl.recipes.mini.tasks import generate_tasks
from sweet_rl.environments import make_env
from sweet_rl.io import read_jsonl, write_jsonl
from sweet_rl.prompts import load_prompt
from sweet_rl.records import Trajectory
from sweet_rl.simulators.scripted_simulator import (UNHELPFUL_REPLY, ScriptedSimulator,
                                                    hidden_details)

DISCOUNT = next(t for t in generate_tasks(8, seed=0) if t.extra["mini_family"] == "discount")
RATE = DISCOUNT.extra["mini_details"]["RATE"]
MINIMUM = DISCOUNT.extra["mini_details"]["MINIMUM"]
ROUNDING = DISCOUNT.extra["mini_details"]["ROUNDING"]


def _reply(*agent_messages, task=DISCOUNT):
    """The scripted human's reply after the agent said ``agent_messages`` (earlier replies are
    the simulator's own)."""
    env = make_env("code", task, load_prompt(None, "agent"), load_prompt(None, "user"))
    simulator = ScriptedSimulator()
    for message in agent_messages:
        env.record_agent_turn("", message)
        [reply] = simulator.reply_batch([env.simulator_messages()])
        env.record_user_reply(reply)
    return reply.text


def test_it_answers_the_detail_a_question_names():
    assert _reply("OUTPUT: What is the rate?") == f"The discount takes off {RATE} percent."
    assert _reply("Thinking. OUTPUT: Is there a MINIMUM quantity?") == (
        f"The discount kicks in from {MINIMUM} items.")
    assert _reply("OUTPUT: Which rounding do you want?") == (
        f"The rounding goes '{ROUNDING}'.")


def test_two_details_at_most_in_the_order_of_the_reference():
    assert _reply("OUTPUT: What rounding and what rate?") == (
        f"The discount takes off {RATE} percent. The rounding goes '{ROUNDING}'.")
    assert _reply("OUTPUT: Tell me the rounding, the minimum and the rate.") == (
        f"The discount takes off {RATE} percent. The discount kicks in from {MINIMUM} "
        "items.")


def test_other_questions_get_the_unhelpful_reply():
    assert _reply("OUTPUT: Should the function check its inputs?") == UNHELPFUL_REPLY
    # only the message after OUTPUT: reaches the human, and a keyword must be a whole word
    assert _reply("I need the rate. OUTPUT: Anything else?") == UNHELPFUL_REPLY
    assert _reply("OUTPUT: Is this accurate?") == UNHELPFUL_REPLY
    # it reads the latest question, not earlier ones
    assert _reply("OUTPUT: What is the rate?", "OUTPUT: Thanks, and then?") == UNHELPFUL_REPLY


def test_details_come_from_the_reference_not_from_the_agents_code():
    pasted = "OUTPUT: Is this right?\ndef discounted_total(price, quantity):\n    RATE = 99  # x\n"
    assert _reply(pasted, "OUTPUT: So what is the rate?") == (
        f"The discount takes off {RATE} percent.")
    bare = "def f(x):\n    LIMIT_VALUE = 7\n    return x\n"
    assert hidden_details(f"Hidden:\n{bare}\nRules") == [("limit value", "The limit value is 7.")]


def test_a_comment_above_or_after_the_constant_is_what_the_human_says():
    above = "def f(x):\n    # The fee is 3 per day.\n    FEE = 3\n    CAP = 9\n    return x\n"
    assert hidden_details(above) == [("fee", "The fee is 3 per day."), ("cap", "The cap is 9.")]
    after = "def f(x):\n    FEE = 3  # the fee is 3 per day\n    # a note\n\n    CAP = 9\n"
    assert hidden_details(after) == [("fee", "The fee is 3 per day."), ("cap", "The cap is 9.")]


def test_replies_are_deterministic_and_never_code():
    questions = ["OUTPUT: What is the rate?", "OUTPUT: rounding?", "OUTPUT: minimum and rate",
                 "OUTPUT: hello"]
    for task in generate_tasks(12, seed=7):
        env = make_env("code", task, load_prompt(None, "agent"), load_prompt(None, "user"))
        batch = []
        for question in questions:
            env.reset()
            env.record_agent_turn("", question)
            batch.append(env.simulator_messages())
        first = [r.text for r in ScriptedSimulator().reply_batch(batch)]
        assert first == [r.text for r in ScriptedSimulator().reply_batch(batch)]
        for text in first:
            assert not any(code in text for code in ("def ", "```", "return", " = "))


def test_the_factory_selects_it_by_name():
    from sweet_rl.stages.factory import build_simulator
    from sweet_rl.stages.simulate_options import SimulatorOptions

    scripted = SimulatorOptions(env_model="scripted")
    assert isinstance(build_simulator(scripted), ScriptedSimulator)
    with pytest.raises(ValueError, match="--env_model scripted"):
        build_simulator(SimulatorOptions(hostname="localhost", env_model="scripted"))
    with pytest.raises(ValueError, match="--task_type code"):
        build_simulator(scripted, task_type="html")


# the simulate script end to end in a subprocess
@pytest.mark.slow
def test_simulate_script_with_the_tiny_agent_and_the_scripted_human(tmp_path, repo_root):
    tasks = generate_tasks(2, seed=0)
    tasks_path, out = tmp_path / "mini.jsonl", tmp_path / "traj.jsonl"
    write_jsonl(str(tasks_path), tasks)
    result = subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "simulate_interactions.py"),
         "--agent_model", "tiny", "--env_model", "scripted", "--input_path", str(tasks_path),
         "--output_path", str(out), "--max_new_tokens", "16", "--max_steps", "3",
         "--device", "cpu"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_jsonl(str(out), Trajectory.from_dict)
    assert [r.task.ground_truth for r in rows] == [t.ground_truth for t in tasks]
    replies = [turn.content for row in rows for turn in row.dialogue_history[1:]
               if turn.role == "user"]
    assert replies  # the random agent rarely answers at once
    for row in rows:
        said = [sentence for _, sentence in hidden_details(row.task.ground_truth)]
        for turn in row.dialogue_history[1:]:
            if turn.role == "user":  # the unhelpful reply, or scripted sentences only
                rest = turn.content
                for sentence in said:
                    rest = rest.replace(sentence, "")
                assert turn.content == UNHELPFUL_REPLY or not rest.strip(), turn.content
    assert json.loads((tmp_path / "traj.jsonl.config.json").read_text())
