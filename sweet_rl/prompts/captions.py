"""The three sentences that frame the pictures in the frontend simulator's message.

The simulated human's one user message is the simulator prompt, then the agent's page of this
turn introduced by one sentence (or, when the turn shows no page, another sentence instead),
then the reference page introduced by a third. The vision-language simulator reads them, so
they are part of the template a run states: a JSON file with one string per place,

    {"agent_page": "...", "no_page": "...", "reference_page": "..."}

given with ``--user_captions_path``. The bundled file is in our own words; the original's
sentences are in its environment code, and a user who wants them writes such a file (see
docs/differences.md). Each string is sent exactly as written, as a text part of its own.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from sweet_rl.records import RecordError

BUNDLED_CAPTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "human_simulator_html_captions.json")
CAPTION_FIELDS = ("agent_page", "no_page", "reference_page")


@dataclass(frozen=True)
class PageCaptions:
    agent_page: str  # before the page the agent showed in its latest message
    no_page: str  # instead of it, when that message showed none
    reference_page: str  # before the page the simulated human wants


def load_captions(path: Optional[str] = None) -> PageCaptions:
    """Read a captions file; ``None`` or ``"auto"`` means the bundled one.

    A file that is not a JSON object of exactly the three strings is a
    :class:`~sweet_rl.records.RecordError` (a ValueError) naming the file and the field, or
    the line and column of a syntax error.
    """
    if path in (None, "", "auto"):
        return _bundled()
    return _read(str(path))


@lru_cache(maxsize=1)
def _bundled() -> PageCaptions:
    return _read(BUNDLED_CAPTIONS)


def _read(path: str) -> PageCaptions:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"captions file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordError(f"not valid JSON ({err.msg} at column {err.colno})", path=path,
                          line=err.lineno) from None
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object with {', '.join(CAPTION_FIELDS)}, got "
                          f"{type(data).__name__}", path=path)
    unknown = sorted(set(data) - set(CAPTION_FIELDS))
    if unknown:
        raise RecordError(f"unknown field (the fields are {', '.join(CAPTION_FIELDS)})",
                          field=unknown[0], path=path)
    for name in CAPTION_FIELDS:
        if name not in data:
            raise RecordError("missing", field=name, path=path)
        if not isinstance(data[name], str):
            raise RecordError(f"expected str, got {type(data[name]).__name__}", field=name,
                              path=path)
    return PageCaptions(**{name: data[name] for name in CAPTION_FIELDS})
