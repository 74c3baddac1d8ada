"""A scripted simulated human: deterministic rule-based replies, no model.

Made for the miniature ColBench (:mod:`sweet_rl.recipes.mini.tasks`), where a reply must be the
same every time so that differences between agents come from the agents alone, and cheap
enough to run thousands of dialogues on a CPU. It reads exactly what a model simulator reads —
the messages the backend environment builds (a system message and one user message holding the
filled simulator prompt) — and nothing else:

* the hidden details: the reference function in the prompt (the hidden information) declares
  them as named constants in its body, each with what the human says in a comment, either on
  a line of its own just above (``# The fee is 2 per day.`` then ``FEE = 2``, the miniature's
  layout) or after the value (``FEE = 2  # the fee is 2 per day``); ``NAME`` in lower case
  (underscores as spaces) is the keyword a question must use;
* the agent's question: the last ``assistant:`` turn of the transcript at the end of the
  prompt (the environment writes each turn as ``role:content`` plus a separator and ends with
  the ``agent:`` cue).

It answers the details the question names, in the order the reference declares them and at
most ``MAX_DETAILS`` per reply (the model simulator's prompt allows two sentences), each as the
constant's comment made into a sentence ("The discount takes off 15 percent."). A question that
names none gets ``UNHELPFUL_REPLY``. It never writes code: the comment is the only text of the
reference it repeats, and a constant without one is said as "The <keyword> is <value>.".
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from sweet_rl.environments.base import SIMULATOR_CUE, TURN_SEPARATOR
from sweet_rl.simulators.base import DialogueKeys, Simulator
from sweet_rl.types import ChatMessages, SimulatorReply

UNHELPFUL_REPLY = "I'm not sure what you mean; it should just work."
MAX_DETAILS = 2
# the first function that starts a line: the reference (the request only quotes the signature
# inside a sentence, and the transcript comes after the hidden information in the prompt)
_FUNCTION = re.compile(r"^def \w+\(.*\):[^\n]*\n((?:[ \t]+[^\n]*\n?|\n)*)", re.M)
_CONSTANT = re.compile(r"[ \t]+([A-Z][A-Z0-9_]*) = ([^#\n]+?)[ \t]*(?:#[ \t]*([^\n]*))?")
_COMMENT_LINE = re.compile(r"[ \t]+#[ \t]*([^\n]*)")
_AGENT_TURN = TURN_SEPARATOR + "assistant:"

Detail = Tuple[str, str]  # (keyword, the sentence that answers it)


def hidden_details(prompt: str) -> List[Detail]:
    """The named constants of the first function in ``prompt``, as (keyword, sentence)."""
    function = _FUNCTION.search(prompt)
    if function is None:
        return []
    details, above = [], ""  # above: a comment line just before the current line
    for line in function.group(1).splitlines():
        constant = _CONSTANT.fullmatch(line)
        if constant:
            name, value, comment = constant.groups()
            keyword = name.lower().replace("_", " ")
            said = (comment or above).strip().rstrip(".") or f"the {keyword} is {value.strip()}"
            details.append((keyword, said[0].upper() + said[1:] + "."))
        comment_line = _COMMENT_LINE.fullmatch(line)
        above = comment_line.group(1) if comment_line else ""
    return details


def last_question(prompt: str) -> Optional[str]:
    """The agent's latest message in the transcript, or None when it has not spoken."""
    start = prompt.rfind(_AGENT_TURN)
    if start < 0:
        return None
    start += len(_AGENT_TURN)
    end = prompt.rfind(TURN_SEPARATOR + SIMULATOR_CUE)
    return prompt[start:end if end >= start else len(prompt)]


def names(question: str, keyword: str) -> bool:
    """Whether ``question`` names ``keyword`` as a word (a plural counts: "rates")."""
    pattern = r"\b" + r"\s+".join(map(re.escape, keyword.split())) + r"s?\b"
    return re.search(pattern, question, re.I) is not None


def reply_to(prompt: str) -> str:
    question = last_question(prompt)
    if question is None:
        return UNHELPFUL_REPLY
    said = [sentence for keyword, sentence in hidden_details(prompt) if names(question, keyword)]
    return " ".join(said[:MAX_DETAILS]) if said else UNHELPFUL_REPLY


class ScriptedSimulator(Simulator):
    """Select it with ``--env_model scripted``
    (see :func:`sweet_rl.stages.factory.build_simulator`)."""

    name = "scripted"

    def reply_batch(self, conversations: List[ChatMessages],
                    keys: DialogueKeys = None) -> List[SimulatorReply]:
        replies = []
        for messages in conversations:
            # the filled prompt is the last user message (plain text for backend tasks)
            prompt = next((m["content"] for m in reversed(messages)
                           if m.get("role") == "user" and isinstance(m.get("content"), str)), "")
            replies.append(SimulatorReply(text=reply_to(prompt)))
        return replies
