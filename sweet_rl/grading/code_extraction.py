"""Cut the code out of a backend answer, and the benchmark's word block list.

Both follow the published ColBench grader, whose scores depend on them:

- the code is the text inside the first ```` ```python ```` fence, else inside the first
  ```` ``` ```` fence of any kind (the fence's language tag, if any, stays in the code, so
  ```` ```py ```` answers fail to run, as in the original), else the whole answer;
- an answer whose *whole text* contains one of ``BLOCKED_WORDS`` scores 0 without being run:
  the published grader tests the answer before it cuts the code out of a fence, so prose such
  as "run it without sudo" or "no need to call exit()" blocks it too. The list is a plain
  substring test, so it also blocks harmless text such as ``"sudo apt ..."`` in a string
  literal, and it is easy to avoid (``__import__('os')``): it is a rule of the benchmark, not a
  security boundary. Isolation is the sandbox's job.
"""

from __future__ import annotations

from typing import Optional

BLOCKED_WORDS = ("import os", "from os", "import sys", "from sys", "sudo", "transformers",
                 "exit(", "quit(", "argparse")

_PYTHON_FENCE = "```python"
_ANY_FENCE = "```"


def extract_code(answer: str) -> str:
    """The code of an answer: inside a ```python fence, else any ``` fence, else all of it.

    An unclosed fence runs to the end of the text.
    """
    for fence in (_PYTHON_FENCE, _ANY_FENCE):
        start = answer.find(fence)
        if start >= 0:
            body = answer[start + len(fence):]
            end = body.find(_ANY_FENCE)
            return body if end < 0 else body[:end]
    return answer


def is_blocked(answer: str) -> Optional[str]:
    """The first block-listed word found in ``answer`` (pass the whole answer text, not the
    code cut out of it), or None when the answer may run."""
    for word in BLOCKED_WORDS:
        if word in answer:
            return word
    return None
