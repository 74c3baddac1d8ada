"""The turn protocol, with the original's exact slicing: the message is the text between the
first and the second OUTPUT:, the answer the text between the first and the second
I WANT TO ANSWER:, and nothing is stripped."""

from sweet_rl.environments.protocol import (NO_ANSWER, answer_text, dialogue_ends,
                                            parse_agent_output)


def test_only_text_after_first_output_marker_is_the_message():
    parsed = parse_agent_output("I should ask about units.\nOUTPUT: Which units? ")
    assert parsed.message == " Which units? "  # not stripped: later prompts hold it as written
    assert parsed.raw_output == "I should ask about units.\nOUTPUT: Which units? "
    assert not parsed.is_answer


def test_second_output_marker_is_cut_from_message_and_stored_output():
    parsed = parse_agent_output("think OUTPUT: first OUTPUT: second OUTPUT: third")
    assert parsed.message == " first "
    assert parsed.raw_output == "think OUTPUT: first "


def test_without_marker_the_whole_generation_is_the_message():
    parsed = parse_agent_output("  What should happen with empty lists?\n")
    assert parsed.message == parsed.raw_output == "  What should happen with empty lists?\n"


def test_answer_marker_ends_the_dialogue_and_carries_the_answer():
    parsed = parse_agent_output(
        "OUTPUT: I WANT TO ANSWER: ```python\ndef f():\n    return 1\n```\n"
    )
    assert parsed.is_answer and dialogue_ends(parsed, turn_number=3)
    assert answer_text(parsed.message) == " ```python\ndef f():\n    return 1\n```\n"


def test_the_answer_stops_at_a_second_answer_marker():
    message = "I WANT TO ANSWER: def f(): return 1\nI WANT TO ANSWER: def f(): return 2"
    assert answer_text(message) == " def f(): return 1\n"


def test_answer_marker_in_the_thinking_part_does_not_count():
    parsed = parse_agent_output("Soon I WANT TO ANSWER: x\nOUTPUT: one more question?")
    assert not parsed.is_answer


def test_tenth_turn_ends_anyway_and_the_whole_message_is_the_answer():
    parsed = parse_agent_output("OUTPUT: def f(): return 2")
    assert not dialogue_ends(parsed, turn_number=9)
    assert dialogue_ends(parsed, turn_number=10)
    assert answer_text(parsed.message) == " def f(): return 2"
    assert NO_ANSWER == "No answer"  # the answer of a dialogue that never gave one
