"""The leak meter: the rule (sweet_rl.environments.leaks), the backend environment's bookkeeping
of leaking replies and resamples, and the counts written for a run."""

import json

import pytest

from sweet_rl.recipes.mini.tasks import generate_tasks
from sweet_rl.environments import BackendEnv, DesignEnv, make_env
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.environments.leaks import (LEAK_RUN, RESAMPLE_REMINDER, code_tokens, format_leak_rate,
                            leak_summary, reply_leaks, strip_comments)
from sweet_rl.prompts import load_prompt
from sweet_rl.records import Task, Trajectory
from sweet_rl.simulators.scripted_simulator import hidden_details
from sweet_rl.types import SimulatorReply

# A reference in the miniature ColBench's layout (sweet_rl.recipes.mini.tasks), written out so
# that the expected values below do not move with the generator.
REFERENCE = """def late_fee(days_late):
    # The fee runs 4 per day, and this sentence is long enough to be a run of its own.
    FEE = 4
    # The grace period lasts 8 days.
    GRACE = 8
    # The fee never goes above 20.
    CAP = 20
    fee = max(0, days_late - GRACE) * FEE
    return min(fee, CAP)
"""
REQUEST = ("Write a function that works out the fee for returning a library book late. "
           "The signature of the function is: def late_fee(days_late)")
PASTED_LINE = "fee = max(0, days_late - GRACE) * FEE"
SENTENCE = "The fee is 4 per day and the cap is 20."
LONG_SIGNATURE = ("def apply_fixed_point_fir_filter(input_signal, coefficients, word_length, "
                  "fraction_length)")


# -- the rule ------------------------------------------------------------------------------
def test_threshold_and_tokens():
    assert LEAK_RUN == 10
    assert code_tokens("if x >= 2.5: y_1 = f(x)") == \
        ["if", "x", ">", "=", "2.5", ":", "y_1", "=", "f", "(", "x", ")"]
    assert len(code_tokens(PASTED_LINE)) == 12


def test_a_plain_sentence_with_numbers_does_not_leak():
    assert not reply_leaks(SENTENCE, REFERENCE)
    assert not reply_leaks("The grace period lasts 8 days; after that it's 4 a day, at most 20.",
                           REFERENCE)


def test_any_fenced_block_leaks_even_of_other_code():
    assert reply_leaks("Something like:\n```python\nprint('hello')\n```", REFERENCE)
    assert reply_leaks("```", "def g():\n    return 1\n")


def test_a_pasted_line_of_the_reference_leaks():
    assert reply_leaks(PASTED_LINE, REFERENCE)
    assert reply_leaks(f"Sure, it is just {PASTED_LINE} and then the cap.", REFERENCE)
    # layout does not hide it: tokens ignore spacing and line breaks, runs cross lines
    assert reply_leaks("fee=max(0,days_late-GRACE)*FEE", REFERENCE)
    assert reply_leaks("CAP = 20 fee = max(0, days_late", REFERENCE)  # 10 tokens, two lines


def test_a_short_shared_phrase_does_not_leak():
    assert not reply_leaks("days_late", REFERENCE)
    assert not reply_leaks("Subtract the grace from days_late - GRACE, then times FEE.",
                           REFERENCE)


def test_threshold_edge():
    nine = "Roughly max(0, days_late - GRACE) * and so on"
    ten = "Roughly max(0, days_late - GRACE) * FEE and so on"
    assert len(code_tokens("max(0, days_late - GRACE) *")) == LEAK_RUN - 1
    assert not reply_leaks(nine, REFERENCE)
    assert reply_leaks(ten, REFERENCE)
    # the threshold is a parameter
    assert reply_leaks(nine, REFERENCE, min_run=9)
    assert not reply_leaks(ten, REFERENCE, min_run=11)
    with pytest.raises(ValueError, match="min_run"):
        reply_leaks(SENTENCE, REFERENCE, min_run=0)


def test_comments_are_prose_and_do_not_count():
    said = "The fee runs 4 per day, and this sentence is long enough to be a run of its own."
    assert len(code_tokens(said)) > LEAK_RUN
    assert not reply_leaks(said, REFERENCE)
    assert strip_comments('x = "#1"  # the note\ny = 2\n') == 'x = "#1"  \ny = 2\n'
    # code Python's tokenizer rejects: everything from "#" to the end of the line goes
    assert strip_comments("def f(:\n  # c\n  x = 1 # d\n") == "def f(:\n  \n  x = 1 \n"


def test_the_public_signature_is_not_a_leak():
    body = "return [x >> fraction_length for x in input_signal]"
    reference = f"{LONG_SIGNATURE}:\n    {body}\n"
    request = f"Filter a signal. The signature of the function is: {LONG_SIGNATURE}"
    assert len(code_tokens(LONG_SIGNATURE)) == 11
    assert reply_leaks(LONG_SIGNATURE, reference)  # without the request, the signature counts
    assert not reply_leaks(LONG_SIGNATURE, reference, public=request)
    # the signature plus a few tokens of the body: only the body's tokens count (4 of them)
    assert not reply_leaks(f"{LONG_SIGNATURE}: return [x", reference, public=request)
    # the signature and the whole body line: 12 secret tokens in a row
    assert reply_leaks(f"{LONG_SIGNATURE}: {body}", reference, public=request)
    assert not reply_leaks(body, reference, public=request, min_run=12)
    assert reply_leaks(body, reference, public=request, min_run=11)


def test_generated_references_leak_when_pasted_not_when_told():
    """The scripted human's sentences (the references' comments) never leak; a pasted
    statement of the same reference does."""
    for task in generate_tasks(12, 0, "train"):
        reference = task.ground_truth
        statements = [line.strip() for line in strip_comments(reference).splitlines()
                      if len(code_tokens(line)) >= LEAK_RUN]
        assert statements, reference
        for statement in statements:
            assert reply_leaks(statement, reference, public=task.problem_description)
        for _, sentence in hidden_details(reference):
            assert not reply_leaks(sentence, reference, public=task.problem_description)


def test_real_colbench_requests_sent_back_do_not_leak():
    from tests.conftest import colbench_file

    with open(colbench_file("backend_test.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle][:200]
    flagged = [i for i, r in enumerate(rows) if reply_leaks(
        r["problem_description"], r["ground_truth"], public=r["problem_description"])]
    assert flagged == []
    # the whole reference sent back leaks, but for one-liners with under 10 tokens after the
    # signature (e.g. "def check_dependency(module, dependencies): return module in ...")
    missed = [i for i, r in enumerate(rows) if not reply_leaks(
        r["ground_truth"], r["ground_truth"], public=r["problem_description"])]
    assert len(missed) == 10
    for i in missed:
        body = rows[i]["ground_truth"].split(":", 1)[1]
        assert len(code_tokens(body)) < LEAK_RUN, rows[i]["ground_truth"]


# -- the summary ---------------------------------------------------------------------------
def _row(replies, leaked, **extra):
    history = [{"role": "user", "content": "the request"}]
    for i in range(replies):
        history += [{"role": "assistant", "content": f"q{i}"},
                    {"role": "user", "content": f"a{i}"}]
    return {"task": {"problem_description": "p", "ground_truth": "g"},
            "dialogue_history": history, "answer": "", "leaked_replies": leaked, **extra}


def test_leak_summary_and_format():
    frontend = _row(3, 0)
    del frontend["leaked_replies"]
    rows = [_row(2, 1), _row(2, 0), frontend, _row(5, "many"), _row(0, 0)]
    summary = leak_summary(rows)
    assert summary == {"replies": 4, "leaking": 1, "dialogues": 3, "dialogues_with_leak": 1,
                       "rate": 0.25}
    assert format_leak_rate(summary) == "leak rate 0.250 (1 of 4 replies)"
    assert leak_summary([Trajectory.from_dict(r) for r in rows]) == summary
    assert format_leak_rate({"replies": 388, "leaking": 12, "rate": 12 / 388}) == \
        "leak rate 0.031 (12 of 388 replies)"
    empty = leak_summary([frontend])
    assert empty == {"replies": 0, "leaking": 0, "dialogues": 0, "dialogues_with_leak": 0,
                     "rate": None}
    assert format_leak_rate(empty) == "leak rate n/a (0 replies checked)"


# -- the environment -----------------------------------------------------------------------
def _env(resample_leaks=0, **kwargs):
    task = Task(problem_description=REQUEST, ground_truth=REFERENCE,
                test_cases={"test1": "late_fee(10)"})
    return BackendEnv(task, load_prompt(None, "agent"), load_prompt(None, "user"),
                      resample_leaks=resample_leaks, **kwargs)


def _ask(env, question="What is the fee?"):
    assert not env.record_agent_turn("PROMPT", f"thinking OUTPUT: {question}")


def test_leaks_are_recorded_at_their_history_index():
    env = _env()
    _ask(env)
    env.record_user_reply(SimulatorReply(SENTENCE))
    _ask(env)
    env.record_user_reply(SimulatorReply(f"It is {PASTED_LINE}."))
    _ask(env)
    env.record_user_reply(SimulatorReply(None, error="HTTP 400: context too long"))
    _ask(env)
    env.record_user_reply(SimulatorReply("```\nreturn 0\n```"))
    assert [t.role for t in env.history] == ["user"] + ["assistant", "user"] * 4
    assert env.history[6].content == "No response."
    assert env.leak_turns == [4, 8]
    traj = env.trajectory()
    assert traj.extra == {"simulator_errors": ["simulator: HTTP 400: context too long"],
                          "leaked_replies": 2, "leak_turns": [4, 8]}
    again = Trajectory.from_dict(json.loads(json.dumps(traj.to_dict())))
    assert again.extra == traj.extra
    assert leak_summary([traj]) == {"replies": 4, "leaking": 2, "dialogues": 1,
                                    "dialogues_with_leak": 1, "rate": 0.5}


def test_the_check_sees_the_reply_as_stored():
    env = _env(resample_leaks=1, reply_chars=40)
    late = "x" * 30 + " " + PASTED_LINE  # the paste starts before the cut and ends after it
    _ask(env)
    assert not env.wants_resample(SimulatorReply(late))
    env.record_user_reply(SimulatorReply(late))
    _ask(env)
    env.record_user_reply(SimulatorReply(PASTED_LINE + " " + "x" * 30))
    assert env.leak_turns == [4]
    assert env.trajectory().extra == {"leaked_replies": 1, "leak_turns": [4],
                                      "leak_resamples": 0}


def test_a_clean_dialogue_has_empty_leak_keys_and_no_resample_key():
    env = _env()
    _ask(env)
    env.record_user_reply(SimulatorReply(SENTENCE))
    assert env.record_agent_turn("PROMPT", "OUTPUT: I WANT TO ANSWER: def late_fee(d): 0")
    assert env.trajectory().extra == {"leaked_replies": 0, "leak_turns": []}


def test_resamples_are_counted_per_turn_up_to_the_limit():
    env = _env(resample_leaks=2)
    leaky, clean = SimulatorReply(PASTED_LINE), SimulatorReply(SENTENCE)
    _ask(env)
    assert not env.wants_resample(clean)  # a clean reply is stored, and costs nothing
    assert [env.wants_resample(leaky) for _ in range(3)] == [True, True, False]
    env.record_user_reply(leaky)  # the limit reached: the leaking reply is stored
    _ask(env)
    assert env.wants_resample(leaky)  # a new turn, a new allowance
    assert not env.wants_resample(SimulatorReply(None, error="HTTP 400"))
    env.record_user_reply(clean)
    assert (env.leak_resamples, env.turn_resamples) == (3, 0)
    assert env.trajectory().extra == {"leaked_replies": 1, "leak_turns": [2],
                                      "leak_resamples": 3}
    env.reset()
    assert (env.leak_turns, env.leak_resamples, env.turn_resamples) == ([], 0, 0)


def test_without_resample_leaks_nothing_is_resampled():
    env = _env()
    _ask(env)
    assert not env.wants_resample(SimulatorReply(PASTED_LINE))
    assert env.leak_resamples == 0
    with pytest.raises(ValueError, match="resample_leaks"):
        _env(resample_leaks=-1)
    with pytest.raises(ValueError, match="resample_leaks"):
        _env(resample_leaks=True)


def test_the_reminder_is_appended_only_when_asked():
    env = _env(resample_leaks=1)
    _ask(env)
    plain = env.simulator_messages()
    reminded = env.simulator_messages(reminder=True)
    assert RESAMPLE_REMINDER not in json.dumps(plain)
    assert reminded[0] == plain[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert reminded[1]["content"] == plain[1]["content"] + "\n\n" + RESAMPLE_REMINDER
    assert plain[1]["content"].endswith("Write only your next reply to the agent, as the human "
                                        "user.\n")
    assert env.simulator_messages() == plain  # asking for the reminder changed nothing


def test_the_rollout_contract_with_hand_made_replies():
    """What the rollout does with one dialogue: ask, and while ``wants_resample`` says so, ask
    again with the reminder; then store the reply."""
    env = _env(resample_leaks=3)
    script = [SimulatorReply(f"```\n{PASTED_LINE}\n```"), SimulatorReply(PASTED_LINE),
              SimulatorReply(SENTENCE)]
    sent = []
    _ask(env)
    reminder = False
    while True:
        sent.append(env.simulator_messages(reminder=True) if reminder
                    else env.simulator_messages())
        reply = script.pop(0)
        if not env.wants_resample(reply):
            env.record_user_reply(reply)
            break
        reminder = True
    assert [RESAMPLE_REMINDER in m[1]["content"] for m in sent] == [False, True, True]
    assert env.history[-1].content == SENTENCE
    assert env.trajectory().extra == {"leaked_replies": 0, "leak_turns": [],
                                      "leak_resamples": 2}


def test_only_the_backend_checks_and_make_env_passes_the_keyword_on():
    assert BackendEnv.checks_leaks is True
    assert DesignEnv.checks_leaks is False and CollaborationEnv.checks_leaks is False
    env = make_env("code", _env().task, "agent", "user", resample_leaks=2)
    assert isinstance(env, BackendEnv) and env.resample_leaks == 2

    class Unchecked(BackendEnv):
        checks_leaks = False

    quiet = Unchecked(_env().task, "agent", "user", resample_leaks=2)
    _ask(quiet)
    assert not quiet.wants_resample(SimulatorReply(PASTED_LINE))
    quiet.record_user_reply(SimulatorReply(PASTED_LINE))
    assert quiet.leak_turns == [] and quiet.trajectory().extra == {}
