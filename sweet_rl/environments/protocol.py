"""The agent-side turn protocol shared by every ColBench environment (pure functions).

Facts matched from the original, because every later turn's prompt depends on them:
- the agent may think first; the message the human sees is the text between the first and
  the second ``OUTPUT:`` (all of it when there is no marker), and the stored raw output keeps
  everything up to the second ``OUTPUT:``;
- neither is stripped of whitespace: the message goes into the dialogue exactly as written;
- a message containing ``I WANT TO ANSWER:`` ends the dialogue, and the answer is the text
  between the first and the second such marker; at the last allowed turn the dialogue ends
  anyway and the whole message is the answer;
- a dialogue that ends without any answer (e.g. the reference page of a frontend task did not
  render) has the answer ``"No answer"``.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTPUT_MARKER = "OUTPUT:"
ANSWER_MARKER = "I WANT TO ANSWER:"
NO_ANSWER = "No answer"
MAX_TURNS = 10


@dataclass(frozen=True)
class ParsedTurn:
    message: str  # what the human sees
    raw_output: str  # the generation as stored (cut before a second OUTPUT:)
    is_answer: bool  # the agent said I WANT TO ANSWER:


def parse_agent_output(raw: str) -> ParsedTurn:
    """Split a raw generation into the visible message and the stored output."""
    message, stored = raw, raw
    if OUTPUT_MARKER in raw:
        pieces = raw.split(OUTPUT_MARKER)
        message = pieces[1]
        stored = OUTPUT_MARKER.join(pieces[:2])
    return ParsedTurn(message=message, raw_output=stored, is_answer=ANSWER_MARKER in message)


def answer_text(message: str) -> str:
    """The final answer carried by a message: the text between the first and the second
    I WANT TO ANSWER:, else the whole message."""
    if ANSWER_MARKER in message:
        return message.split(ANSWER_MARKER)[1]
    return message


def dialogue_ends(parsed: ParsedTurn, turn_number: int, max_turns: int = MAX_TURNS) -> bool:
    """``turn_number`` counts agent turns from 1."""
    return parsed.is_answer or turn_number >= max_turns
