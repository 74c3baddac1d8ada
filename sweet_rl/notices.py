"""One-time notices about flags that are accepted but change nothing here.

The stage scripts and the training options both give them (the original's flags that mean
nothing in this code), so the helper sits below both: the library must not import the
command-line layer to log a line.
"""

from __future__ import annotations

import logging

# The notices are about the command line, so they keep the logger name they always had.
logger = logging.getLogger("sweet_rl.cli")

_NOTICES_GIVEN: set = set()


def notice_once(message: str) -> None:
    """Log ``message`` once per process: flags of the original code that mean nothing here."""
    if message not in _NOTICES_GIVEN:
        _NOTICES_GIVEN.add(message)
        logger.warning(message)
