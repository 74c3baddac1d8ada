"""Finding the page an agent shows in a frontend turn (pure functions, no rendering).

Rules matched from the original frontend environment:
- only the visible message counts (the text after ``OUTPUT:``, see
  :func:`sweet_rl.environments.protocol.parse_agent_output`): a page written while thinking is
  never shown;
- a message holds at most one page: the first ``<html ...>...</html>`` (shortest match, across
  lines), else the first ``<body ...>...</body>``;
- :func:`split_page` also gives the message with that page replaced by ``[SEE RENDERED HTML]``
  (the original computed it but kept the full message in the dialogue, as the design
  environment does by default); the raw output keeps everything.

Tag names are matched case-insensitively, as HTML itself treats them; ``<htmlx>`` is not a tag.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple


PAGE_PLACEHOLDER = "[SEE RENDERED HTML]"

_HTML_RE = re.compile(r"<html(?:\s[^>]*)?>.*?</html\s*>", re.IGNORECASE | re.DOTALL)
_BODY_RE = re.compile(r"<body(?:\s[^>]*)?>.*?</body\s*>", re.IGNORECASE | re.DOTALL)


def find_page(message: str) -> Optional[Tuple[int, int]]:
    """``(start, end)`` of the page in ``message``, or None when it holds no page."""
    match = _HTML_RE.search(message) or _BODY_RE.search(message)
    return match.span() if match else None


def split_page(message: str) -> Tuple[str, Optional[str]]:
    """``(content with the page replaced by the placeholder, page or None)``."""
    span = find_page(message)
    if span is None:
        return message, None
    start, end = span
    return message[:start] + PAGE_PLACEHOLDER + message[end:], message[start:end]
