"""Finding the page an agent shows in a frontend turn (pure functions, no rendering).

Rules matched from the original frontend environment:
- only the visible message counts (the text after ``OUTPUT:``, see
  :func:`sweet_rl.environments.protocol.parse_agent_output`): a page written while thinking is
  never shown;
- a message holds at most one page: the first ``<html...>...</html>`` (shortest match, across
  lines), else the first ``<body...>...</body>``;
- :func:`split_page` also gives the message with that page replaced by ``[SEE RENDERED HTML]``
  (the original computed it but kept the full message in the dialogue, as the design
  environment does by default); the raw output keeps everything.

Two rules tell which text is a tag (``lenient`` chooses):

* the original's (the default): tag names are matched as written, in lower case, so a message
  whose page is ``<HTML>...</HTML>`` holds no page; the opening tag is ``<html`` followed by
  anything up to the next ``>`` (``<htmlx>`` too) and the closing tag is exactly ``</html>``;
* the lenient one (``--lenient_pages``): tag names in any case, as HTML itself reads them, the
  opening tag is ``<html>`` or ``<html`` with attributes (``<htmlx>`` is no tag), and the
  closing tag may have spaces before its ``>``.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple


PAGE_PLACEHOLDER = "[SEE RENDERED HTML]"

# ``<html[^>]*>`` ends the opening tag at its first ``>``, as a shortest ``<html.*?>`` does: a
# later ``>`` is only of use when a closing tag follows it, and then one follows the first too.
_ORIGINAL = (re.compile(r"<html[^>]*>.*?</html>", re.DOTALL),
             re.compile(r"<body[^>]*>.*?</body>", re.DOTALL))
_LENIENT = (re.compile(r"<html(?:\s[^>]*)?>.*?</html\s*>", re.IGNORECASE | re.DOTALL),
            re.compile(r"<body(?:\s[^>]*)?>.*?</body\s*>", re.IGNORECASE | re.DOTALL))


def find_page(message: str, lenient: bool = False) -> Optional[Tuple[int, int]]:
    """``(start, end)`` of the page in ``message``, or None when it holds no page."""
    whole, body = _LENIENT if lenient else _ORIGINAL
    match = whole.search(message) or body.search(message)
    return match.span() if match else None


def split_page(message: str, lenient: bool = False) -> Tuple[str, Optional[str]]:
    """``(content with the page replaced by the placeholder, page or None)``."""
    span = find_page(message, lenient)
    if span is None:
        return message, None
    start, end = span
    return message[:start] + PAGE_PLACEHOLDER + message[end:], message[start:end]
