"""One step record per assistant turn of the offline trajectories (pure logic, no models).

A step record (:class:`~sweet_rl.records.StepSample`) holds what the agent saw at that turn
(``input``, the chat-formatted prompt), what it wrote then (``older_output``), the
trajectory's ``reward``, the task's ``ground_truth``, the same prompt behind the critic's
training-time prefix (``input_with_ground_truth``) and ``messages``: the dialogue up to and
including this assistant turn, each entry exactly as stored in the trajectory (role, content,
and on the assistant turns ``input``/``output`` and any other keys) -- what the original
wrote. The sample stage adds the candidates and the rank stage the judgement to the same
record, which is what their files hold.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from sweet_rl.records import RecordError, StepSample, Trajectory
from sweet_rl.types import GROUND_TRUTH_PREFIX


def with_ground_truth(text: str, ground_truth: str) -> str:
    """The critic's view of a prompt: the reference solution first (as in its training pairs)."""
    return GROUND_TRUTH_PREFIX.format(ground_truth=ground_truth) + text


def fraction_count(total: int, fraction: float) -> int:
    """How many leading rows ``fraction`` keeps: ``int(total * fraction)``, at least one row.

    The rows are taken from the top of the file, so the choice is deterministic; at least one
    so that a tiny file with e.g. ``--data_fraction 0.1`` still yields something.
    """
    fraction = float(fraction)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"--data_fraction must be in (0, 1], got {fraction}")
    if total == 0:
        return 0
    return max(1, int(total * fraction))


def turn_records(trajectory: Trajectory,
                 stored_history: Optional[List[Dict[str, Any]]] = None) -> List[StepSample]:
    """Step records (without candidates) for every assistant turn, in dialogue order.

    ``stored_history`` is the row's ``dialogue_history`` as read from the file: ``messages``
    copies its entries with their keys in the file's order; without it they are rebuilt
    from the parsed turns (same keys and values).
    """
    if trajectory.reward is None:
        raise RecordError("missing (run the evaluate stage first)", field="reward")
    truth = trajectory.task.ground_truth
    if stored_history is None:
        stored_history = [turn.to_dict() for turn in trajectory.dialogue_history]
    records: List[StepSample] = []
    for index, turn in enumerate(trajectory.dialogue_history):
        if turn.role == "assistant":
            for key in ("input", "output"):
                if getattr(turn, key) is None:
                    raise RecordError("missing on an assistant turn",
                                      field=f"dialogue_history[{index}].{key}")
            records.append(StepSample(
                input=turn.input,
                input_with_ground_truth=with_ground_truth(turn.input, truth),
                older_output=turn.output,
                reward=trajectory.reward,
                ground_truth=truth,
                messages=copy.deepcopy(stored_history[:index + 1]),
            ))
    return records


def _count_rows(path: str) -> int:
    if not os.path.exists(path):
        raise RecordError("file not found", path=path)
    with open(path, "r", encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def read_turn_records(path: str, data_fraction: float = 1.0) -> Tuple[List[StepSample], int]:
    """Step records of the first ``data_fraction`` of the trajectories in ``path``.

    Returns (records, number of trajectories used). Only the rows used are parsed; a bad row
    raises :class:`RecordError` with the file, line and field.
    """
    from sweet_rl.io import iter_jsonl

    keep = fraction_count(_count_rows(path), data_fraction)
    parse = lambda data: turn_records(Trajectory.from_dict(data), data["dialogue_history"])  # noqa: E731
    per_row = list(itertools.islice(iter_jsonl(path, parse), keep))
    return [record for rows in per_row for record in rows], len(per_row)


def dumps_key(*parts: Any) -> str:
    """A comparable identity for resume checks."""
    return json.dumps(parts, ensure_ascii=False)
