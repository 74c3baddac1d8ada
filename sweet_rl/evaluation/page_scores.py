"""The pieces of a frontend evaluation: which picture scores a row's final page, the CLIP
similarity of each answer picture with its reference, the rows' checks, and another run's
best-of-k rewards for the win rate.

Pages are rendered offline (:mod:`sweet_rl.rendering.browser`) only when no screenshot of
them exists yet; a missing or failed page is scored as a black picture and the row gets a
``render_error``. ``"No answer"`` (the agent never showed a page; ours and the original's)
is scored black, as the original did, and is no error. Rows of the original code also load:
their ``answer`` is the path of the final screenshot (.png/.jpg, relative to the file's
folder or absolute), scored from that file, or black with a ``render_error`` when it is gone.
"""

from __future__ import annotations

import json
import os
from typing import List, Optional

from sweet_rl.environments.protocol import NO_ANSWER  # a dialogue without a page (both codes)
from sweet_rl.evaluation.keys import ORIGINAL_SETTINGS, SETTINGS_KEY
from sweet_rl.rendering.pictures import ANSWER_KEY, REFERENCE_KEY

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def check_frontend_rows(path: str, trajectories, want_pairs: bool) -> None:
    """Everything that can be wrong with the rows, found before anything is written."""
    from sweet_rl.records import RecordError

    for line, traj in enumerate(trajectories, start=1):
        if traj.task.test_cases is not None:
            raise RecordError("present: this is a backend task (use scripts/evaluate_code.py)",
                              field="task.test_cases", path=path, line=line)
        if not traj.task.ground_truth.strip():
            raise RecordError("empty (frontend tasks need the reference HTML)",
                              field="task.ground_truth", path=path, line=line)
        for key in (ANSWER_KEY, REFERENCE_KEY):
            value = traj.extra.get(key)
            if value is not None and not isinstance(value, str):
                raise RecordError(f"expected a path string, got {type(value).__name__}",
                                  field=key, path=path, line=line)
        if want_pairs and not traj.assistant_turns:
            raise RecordError("has no assistant turn to build a preference pair from",
                              field="dialogue_history", path=path, line=line)


def settings_of(traj) -> str:
    """The CLIP settings that gave a row's reward (the original's, when none are recorded)."""
    return traj.extra.get(SETTINGS_KEY, ORIGINAL_SETTINGS)


def reference_best(path: str, ours, num_tasks: int, settings: str) -> List[float]:
    """Best-of-k rewards of another evaluated run on the same tasks (any number of rollouts)."""
    from sweet_rl.evaluation.preferences import best_of_k
    from sweet_rl.io import read_jsonl
    from sweet_rl.layout import task_of
    from sweet_rl.records import RecordError, Trajectory

    theirs = read_jsonl(path, Trajectory.from_dict)
    if not theirs or len(theirs) % num_tasks:
        raise RecordError(f"has {len(theirs)} trajectories, not a multiple of the {num_tasks} "
                          "tasks of the run being evaluated", path=path)
    for row, traj in enumerate(theirs):
        task = task_of(row, num_tasks)  # their rollouts follow the same layout as ours
        if traj.task.problem_description != ours[task].task.problem_description:
            raise RecordError(f"differs from task {task + 1} of the run being evaluated "
                              "(runs must hold the same tasks in the same order)",
                              field="task.problem_description", path=path, line=row + 1)
        if traj.reward is None:
            raise RecordError("missing (evaluate that run first)", field="reward", path=path,
                              line=row + 1)
        if settings_of(traj) != settings:
            raise RecordError(f"{settings_of(traj)!r}, but this run scores with {settings!r}: "
                              "similarities from different CLIP settings cannot be compared",
                              field=SETTINGS_KEY, path=path, line=row + 1)
    return best_of_k([t.reward for t in theirs], len(theirs) // num_tasks)


def image_path_answer(answer: str) -> Optional[str]:
    """The picture path an original-code ``answer`` holds, or None for HTML and other text.

    HTML never looks like one: a path is one line without ``<`` or ``>`` ending in an image
    suffix."""
    text = answer.strip()
    if (not text.lower().endswith(IMAGE_SUFFIXES) or len(text) > 4096
            or any(c in text for c in "<>\n")):
        return None
    return text


def final_picture(traj, saved_path: str, directory: str):
    """The picture that scores this row's final page; see the module docstring."""
    from sweet_rl.rendering.pictures import Picture, answer_picture
    from sweet_rl.rendering.screenshots import resolve

    if traj.answer.strip() == NO_ANSWER:
        return Picture()  # no page shown: black, as the original scored it, and not an error
    stored = image_path_answer(traj.answer)
    if stored is None:
        return answer_picture(traj, saved_path, directory)  # our rows: the final page's HTML
    # a relative path is read against the trajectory file's folder
    ours = resolve(traj.extra.get(ANSWER_KEY), saved_path)
    path = ours if ours and os.path.isfile(ours) else resolve(stored, saved_path)
    if os.path.isfile(path):
        return Picture(path=path)
    return Picture(error=f"answer screenshot {stored} not found")


def similarities(scorer, answers: List[Optional[str]], references: List[Optional[str]],
                 batch_size: int) -> List[float]:
    """Cosine similarity of each answer picture with its reference (None = black).

    Each distinct picture (by content) is embedded once: a reference serves k rollouts, and a
    page identical to its reference scores exactly 1 rather than 1 minus rounding noise.
    """
    from sweet_rl.evaluation.clip_similarity import cosine
    from sweet_rl.rendering.pictures import picture_key

    keys = {path: picture_key(path) for path in answers + references}
    first_path = {}
    for path, key in keys.items():
        first_path.setdefault(key, path)
    position = {key: n for n, key in enumerate(first_path)}
    embeddings = scorer.embed(list(first_path.values()), batch_size, progress=True)  # [U, D]
    mine = embeddings[[position[keys[p]] for p in answers]]  # [N, D]
    truth = embeddings[[position[keys[p]] for p in references]]  # [N, D]
    scores = cosine(mine, truth).tolist()  # [N]
    return [1.0 if keys[a] == keys[r] else float(score)
            for a, r, score in zip(answers, references, scores)]


def earlier_browser(saved_path: str) -> Optional[str]:
    """The browser an earlier evaluation recorded, kept when this run renders nothing."""
    try:
        with open(saved_path + ".config.json", encoding="utf-8") as handle:
            return json.load(handle)["stages"]["evaluate_html"].get("browser_version")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
