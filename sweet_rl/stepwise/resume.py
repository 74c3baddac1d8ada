"""Appending to a stage's output after a killed run (sample and rank).

The output is the deterministic list of records a full run would write, in order. A resumed
run counts the complete lines already there (a torn last line is cut by
:func:`sweet_rl.io.count_complete_lines`), checks that they are the first records of this
run (same identity key, so a file made from other input or flags is never extended), and
appends only the rest. Without ``to_continue`` or ``overwrite`` an existing output is an
error, never touched.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, List

from sweet_rl.records import RecordError, StepSample

logger = logging.getLogger(__name__)


def records_done(output_path: str, expected_keys: List[str],
                 key_of: Callable[[StepSample], str], to_continue: bool,
                 overwrite: bool) -> int:
    """How many leading records of this run ``output_path`` already holds (0 for a new file).

    ``expected_keys[i]`` is the identity of record i of a full run; ``key_of`` computes it
    from a record read back from the output.
    """
    from sweet_rl.io import count_complete_lines, iter_jsonl

    if not os.path.exists(output_path):
        return 0
    if overwrite and not to_continue:
        os.remove(output_path)
        return 0
    if not to_continue:
        raise FileExistsError(f"{output_path} exists: pass --to_continue to resume it or "
                              "--overwrite to replace it")
    done = count_complete_lines(output_path)
    if done > len(expected_keys):
        raise RecordError(f"has {done} records but this run makes only {len(expected_keys)}",
                          path=output_path)
    for index, record in enumerate(iter_jsonl(output_path, StepSample.from_dict)):
        if key_of(record) != expected_keys[index]:
            raise RecordError("differs from the record this line should hold; was the file "
                              "made from another input or with other flags?",
                              path=output_path, line=index + 1)
    logger.info("resuming: %d of %d records already in %s", done, len(expected_keys), output_path)
    return done
