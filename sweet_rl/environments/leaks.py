"""A leak meter for the simulated human: does a reply give the hidden reference away?

Why: the backend simulator reads the reference function (its hidden information) to answer
the agent. One that pastes the code turns the task into copying, and success rates then
measure the simulator's discipline, not the agent's asking. This makes it visible.

The rule (plain text, no model). A reply leaks when

1. it holds a Markdown code fence (three backquotes), whatever code is in it: the simulator
   prompt forbids code, and a fence is how chat models paste it; or
2. it shares a run of at least ``LEAK_RUN`` consecutive code tokens with the reference.

Tokens are identifiers, numbers and single punctuation characters (``>=`` is two), so spacing
and line breaks do not hide a paste. Not counted as code in the reference: its comments (prose
the human is meant to say; the miniature keeps the human's very sentences there), and, with
``public`` (the environment passes the task's request, which quotes the signature), every
stretch of at least ``PUBLIC_RUN`` tokens the request also holds: it is cut out and splits the
code, so repeating the signature, or the signature plus a word, reveals nothing.

Why ``LEAK_RUN = 10``: it is the smallest run at which every formula line of the miniature's
references leaks when pasted alone (``fee = max(0, days_late - GRACE) * FEE`` is 12 tokens,
``hundredths = price * quantity * (100 - RATE)`` 11, ``kilograms = (grams + 500) // 1000``
10), while an answer in words shares a name or a number or two in a row with the code, and a
quoted piece such as ``days_late - GRACE`` (3) or ``return min(fee, CAP)`` (7) stays below;
at 12 the last two formulas would pass. Runs cross lines, so several short lines pasted
together are caught. On ColBench's 1000 backend test tasks: a body line alone reaches 10
tokens in 31% of cases (23% at 12); the whole reference sent back leaks for 945 (the others
are one-liners under 10 tokens after the signature); the request sent back leaks for none
(for 321 without ``public``, by the signature). A reported leak is a real paste; the rate is a
lower bound, short one-line pastes being left to the fence rule.

Cost: linear in the reply. The reference's ``min_run``-grams go into a set (cached per
reference) and the reply's windows are looked up in it: a hit means the longest common run is
at least ``min_run``.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from typing import Any, Dict, FrozenSet, Iterable, List, Tuple

LEAK_RUN = 10
PUBLIC_RUN = 5  # a shared run this long marks reference tokens as known ("def f ( x )" is 5)
FENCE = "```"
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?|[^\s\w]")

# Appended (after a blank line) to the simulator's user message when a leaking reply is
# resampled: it restates the prompt's rule at the end, where the model reads it last.
RESAMPLE_REMINDER = ("Reminder: answer as the person who wants the function, in plain words and "
                     "at most two sentences. Do not write code, open a code block or copy any "
                     "line of the hidden information.")


def code_tokens(text: str) -> List[str]:
    """Identifiers, numbers and single punctuation characters of ``text``, in order."""
    return _TOKEN.findall(text)


def strip_comments(code: str) -> str:
    """``code`` without its ``#`` comments (Python's tokenizer, so a ``#`` in a string stays).
    Code the tokenizer rejects loses everything from a ``#`` to the end of its line instead."""
    lines = code.splitlines(keepends=True)
    try:
        comments = [tok for tok in tokenize.generate_tokens(io.StringIO(code).readline)
                    if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"#[^\n]*", "", code)
    for tok in reversed(comments):  # one comment per line at most; columns stay valid
        (row, start), (_, end) = tok.start, tok.end
        line = lines[row - 1]
        lines[row - 1] = line[:start] + line[end:]
    return "".join(lines)


def _grams(tokens: List[str], n: int) -> Iterable[Tuple[str, ...]]:
    return (tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


@functools.lru_cache(maxsize=256)
def _reference_grams(reference: str, min_run: int, public: str) -> FrozenSet[Tuple[str, ...]]:
    """The ``min_run``-grams of the reference's code that lie wholly in its secret part: the
    tokens left once every run of ``PUBLIC_RUN`` tokens that ``public`` also holds is taken
    out (each taken-out stretch splits the code, so no gram spans it)."""
    tokens = code_tokens(strip_comments(reference))
    secret = [True] * len(tokens)
    span = min(PUBLIC_RUN, min_run)
    known = set(_grams(code_tokens(public), span)) if public else set()
    for start, gram in enumerate(_grams(tokens, span)):
        if gram in known:
            secret[start:start + span] = [False] * span
    grams, start = set(), 0
    for end in range(len(tokens) + 1):
        if end == len(tokens) or not secret[end]:
            grams.update(_grams(tokens[start:end], min_run))
            start = end + 1
    return frozenset(grams)


def reply_leaks(reply: str, reference: str, min_run: int = LEAK_RUN, *, public: str = "") -> bool:
    """True when ``reply`` holds a code fence or a run of ``min_run`` code tokens of
    ``reference`` (comments dropped, stretches ``public`` also holds taken out); see the
    module's docstring for the rule and the threshold."""
    if min_run < 1:
        raise ValueError(f"min_run must be at least 1, got {min_run}")
    if FENCE in reply:
        return True
    tokens = code_tokens(reply)
    if len(tokens) < min_run:
        return False
    grams = _reference_grams(reference, min_run, public)
    return any(gram in grams for gram in _grams(tokens, min_run))


def leak_summary(trajectories: Iterable[Any]) -> Dict[str, Any]:
    """Counts over trajectory rows (dicts as stored, or records with ``extra``) that carry the
    environment's ``leaked_replies``; rows without it (frontend, older files) or with a value
    that is not a count are skipped.

    ``replies``: the human's replies checked (user turns after the request); ``leaking``: those
    that leaked; ``dialogues``: rows checked; ``dialogues_with_leak``; ``rate`` = leaking /
    replies (None when no reply was checked).
    """
    replies = leaking = dialogues = with_leak = 0
    for row in trajectories:
        data = row if isinstance(row, dict) else {**row.extra,
                                                  "dialogue_history": row.dialogue_history}
        count = data.get("leaked_replies")
        if isinstance(count, bool) or not isinstance(count, int):
            continue
        turns = data.get("dialogue_history") or []
        roles = [t.get("role") if isinstance(t, dict) else t.role for t in turns]
        dialogues += 1
        replies += max(0, roles.count("user") - 1)  # the first user turn is the request
        leaking += count
        with_leak += count > 0
    return {"replies": replies, "leaking": leaking, "dialogues": dialogues,
            "dialogues_with_leak": with_leak, "rate": leaking / replies if replies else None}


def format_leak_rate(summary: Dict[str, Any]) -> str:
    """A fragment for a metrics line: ``leak rate 0.031 (12 of 388 replies)``."""
    if summary.get("rate") is None:
        return "leak rate n/a (0 replies checked)"
    return f"leak rate {summary['rate']:.3f} ({summary['leaking']} of {summary['replies']} replies)"
