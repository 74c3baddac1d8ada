"""Stage: score frontend trajectories by CLIP similarity with the reference page.

Writes ``reward`` (cosine similarity of the final page's CLIP image embedding with the
reference page's) into the trajectory file, prints the best-of-k similarity (x100, as in the
paper), optionally writes the critic's trajectory-level preference pairs (rollouts of a task
whose rewards differ by at least ``--threshold``) and the win rate against another run.

Pages are rendered offline (:mod:`sweet_rl.rendering.browser`) only when no screenshot of
them exists yet; a missing or failed page is scored as a black picture and the row gets a
``render_error``. ``"No answer"`` (the agent never showed a page; ours and the original's)
is scored black, as the original did, and is no error. Rows of the original code also load:
their ``answer`` is the path of the final screenshot (.png/.jpg, relative to the file's
folder or absolute), scored from that file, or black with a ``render_error`` when it is gone.
Rows that already carry a reward from the same CLIP settings are kept, so a second run costs
nothing and an interrupted one redoes only what it had not written.
"""

from __future__ import annotations

import os
from typing import List, Optional

from sweet_rl.environments.protocol import NO_ANSWER  # a dialogue without a page (both codes)
from sweet_rl.rendering.pictures import ANSWER_KEY, REFERENCE_KEY

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
SETTINGS_KEY = "clip_settings"  # extra key recording what produced ``reward``
ERROR_KEY = "render_error"
# Rows from the original code carry no settings key: it scored with ViT-B/32, OpenAI, centre.
ORIGINAL_SETTINGS = "ViT-B-32|openai|center"


def _validate(path: str, trajectories, want_pairs: bool) -> None:
    """Everything that can be wrong with the rows is found before anything is written
    (an empty file is refused by :func:`~sweet_rl.cli.evaluate_common.load_trajectories`)."""
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


def _settings(traj) -> str:
    return traj.extra.get(SETTINGS_KEY, ORIGINAL_SETTINGS)


def _reference_best(path: str, ours, num_tasks: int, settings: str) -> List[float]:
    """Best-of-k rewards of another evaluated run on the same tasks (any number of rollouts)."""
    from sweet_rl.evaluation.preferences import best_of_k
    from sweet_rl.io import read_jsonl
    from sweet_rl.layout import task_of
    from sweet_rl.records import RecordError, Trajectory

    theirs = read_jsonl(path, Trajectory.from_dict)
    if not theirs or len(theirs) % num_tasks:
        raise RecordError(
            f"has {len(theirs)} trajectories, not a multiple of the {num_tasks} tasks "
            "of the run being evaluated",
            path=path,
        )
    for row, traj in enumerate(theirs):
        task = task_of(row, num_tasks)  # their rollouts follow the same layout as ours
        if traj.task.problem_description != ours[task].task.problem_description:
            raise RecordError(f"differs from task {task + 1} of the run being evaluated "
                              "(runs must hold the same tasks in the same order)",
                              field="task.problem_description", path=path, line=row + 1)
        if traj.reward is None:
            raise RecordError(
                "missing (evaluate that run first)", field="reward", path=path, line=row + 1
            )
        if _settings(traj) != settings:
            raise RecordError(
                f"{_settings(traj)!r}, but this run scores with {settings!r}: similarities "
                "from different CLIP settings cannot be compared",
                field=SETTINGS_KEY,
                path=path,
                line=row + 1,
            )
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


def answer_picture(traj, saved_path: str, directory: str):
    """The picture that scores this row's final page; see the module docstring."""
    from sweet_rl.rendering.pictures import Picture, answer_picture as from_page
    from sweet_rl.rendering.screenshots import resolve

    if traj.answer.strip() == NO_ANSWER:
        return Picture()  # no page shown: black, as the original scored it, and not an error
    stored = image_path_answer(traj.answer)
    if stored is None:
        return from_page(traj, saved_path, directory)  # our rows: the HTML of the final page
    # a relative path is read against the trajectory file's folder
    ours = resolve(traj.extra.get(ANSWER_KEY), saved_path)
    path = ours if ours and os.path.isfile(ours) else resolve(stored, saved_path)
    if os.path.isfile(path):
        return Picture(path=path)
    return Picture(error=f"answer screenshot {stored} not found")


def _score(
    scorer, answers: List[Optional[str]], references: List[Optional[str]], batch_size: int
) -> List[float]:
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
    return [
        1.0 if keys[a] == keys[r] else float(score)
        for a, r, score in zip(answers, references, scores)
    ]


def _earlier_browser(saved_path: str) -> Optional[str]:
    """The browser an earlier evaluation recorded, kept when this run renders nothing."""
    import json

    try:
        with open(saved_path + ".config.json", encoding="utf-8") as handle:
            return json.load(handle)["stages"]["evaluate_html"].get("browser_version")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def main(
    saved_path: str,
    k: int = 1,
    temp_path: Optional[str] = None,
    preference_path: Optional[str] = None,
    ground_truth_preference_path: Optional[str] = None,
    reference_path: Optional[str] = None,
    clip_model: str = "ViT-B-32",
    clip_pretrained: str = "openai",
    crop: str = "center",
    batch_size: int = 32,
    pool_size: Optional[int] = None,
    browser: str = "chromium",
    screenshot_dir: Optional[str] = None,
    device: Optional[str] = None,
    reevaluate: bool = False,
    threshold: float = 0.1,
    seed: int = 0,
    assets_dir: Optional[str] = None,
    page_load_timeout: float = 20.0,
    train: Optional[bool] = None,
    vlm_preference_path: Optional[str] = None,
):
    """Score a frontend trajectory file in place and print the metrics line.

    Example:
        python scripts/evaluate_html.py outputs/html.jsonl --k 2 \\
            --ground_truth_preference_path outputs/html_critic_pairs.jsonl

    Args:
        saved_path: trajectories from simulate --task_type html; ``reward`` is written back.
        k: rollouts per task (simulate's --best_of_n), for best-of-k and pairs.
        temp_path: the original code's folder for rendered screenshots: used as
            --screenshot_dir when that is not given (the positions of the original's arguments
            are kept: SAVED_PATH K TEMP_PATH PREFERENCE_PATH GROUND_TRUTH_PREFERENCE_PATH).
        preference_path: pairs of ``input + output`` of the last agent turn.
        ground_truth_preference_path: the same pairs prefixed with the reference HTML.
        reference_path: another evaluated run on the same tasks; prints the win rate against it.
        clip_model: the open_clip model that embeds the pictures.
        clip_pretrained: its weights: an open_clip tag, a local checkpoint file, or ``none``
            for random weights drawn with ``seed``.
        crop: ``center`` (the original's: middle square of the page) or ``squash`` (whole page).
        batch_size: pictures per CLIP forward pass.
        pool_size: browsers rendering at once (default: up to 4, one per core).
        browser: ``chromium`` or ``firefox``.
        screenshot_dir: where screenshots go (default ``<saved_path stem>_screenshots``).
        device: torch device (default cuda when available).
        reevaluate: score again even rows that already carry a reward from the same settings.
        threshold: the smallest reward gap between two rollouts of a task that makes a pair.
        seed: the seed of random CLIP weights (``--clip_pretrained none``).
        assets_dir: the Tailwind asset cache (default $SWEET_RL_ASSETS or ~/.cache/sweet_rl/assets).
        page_load_timeout: seconds a page may take to render before it counts as failed.
        train: accepted for the original's command lines; it had no effect there either.
        vlm_preference_path: the same pairs for the vision-language critic (train_dpo.py
            --critic_head vlm_regression): each side is {"image": the row's reference
            screenshot, "text": input + output of the last agent turn}
            (sweet_rl/training/vlm_pairs.py); pairs whose reference did not render are left
            out, with a warning.

    Printed at the end: our summary line, then the original's three lines -- the mean
    similarity over all rows as a bare number, ``Best-of-k Average reward: X`` and, when pairs
    are written, ``Number of preference pairs: N``.
    """
    arguments = dict(locals())
    from sweet_rl.evaluation.clip_similarity import CROPS, NO_WEIGHTS, load_clip, settings_tag
    from sweet_rl.cli.common import notice_once
    from sweet_rl.cli.evaluate_common import evaluate, load_trajectories
    from sweet_rl.rendering.pictures import drop_unreadable, reference_picture, render_pending
    from sweet_rl.evaluation.preferences import threshold_pairs, win_rate
    from sweet_rl.layout import task_count
    from sweet_rl.rendering.screenshots import default_screenshot_dir, to_stored

    k, threshold, batch_size = int(k), float(threshold), int(batch_size)
    if train is not None:
        notice_once("--train has no effect on evaluation (it had none in the original code)")
    if temp_path is not None:
        if screenshot_dir is None:
            notice_once(
                f"--temp_path (the original's screenshot folder): rendered pages go to {temp_path}"
            )
            screenshot_dir = str(temp_path)
        else:
            notice_once("--temp_path ignored: --screenshot_dir names the screenshot folder")
    if crop not in CROPS:
        raise ValueError(f"--crop must be one of {CROPS}, got {crop!r}")
    if threshold < 0 or batch_size < 1:
        raise ValueError("--threshold must be >= 0 and --batch_size >= 1")
    want_pairs = bool(preference_path or ground_truth_preference_path or vlm_preference_path)
    trajectories = load_trajectories(
        saved_path, k, lambda path, rows: _validate(path, rows, want_pairs)
    )
    pretrained = None if str(clip_pretrained).lower() in NO_WEIGHTS else str(clip_pretrained)
    settings = settings_tag(clip_model, pretrained, crop, int(seed))
    num_tasks = task_count(len(trajectories), k)
    theirs = (
        _reference_best(reference_path, trajectories, num_tasks, settings)
        if reference_path
        else None
    )

    todo = [
        i
        for i, t in enumerate(trajectories)
        if reevaluate or t.reward is None or _settings(t) != settings
    ]
    render = {"rendered": 0, "failed": 0, "browsers": set()}
    # the sidecars name the browser that rendered these pages: this run's, else an earlier run's
    arguments.update(clip_settings=settings, browser_version=_earlier_browser(saved_path))

    def score(rows):
        directory = screenshot_dir or default_screenshot_dir(saved_path)
        answers = [answer_picture(trajectories[i], saved_path, directory) for i in rows]
        references = [reference_picture(trajectories[i], saved_path, directory) for i in rows]
        scorer = load_clip(clip_model, pretrained, crop, device, int(seed))  # fails fast
        render.update(
            render_pending(answers + references, browser, pool_size, assets_dir, page_load_timeout)
        )
        if render["browsers"]:
            arguments["browser_version"] = ", ".join(sorted(render["browsers"]))
        drop_unreadable(answers + references)
        rewards = _score(
            scorer, [p.path for p in answers], [p.path for p in references], batch_size
        )
        for i, answer, reference, reward in zip(rows, answers, references, rewards):
            traj = trajectories[i]
            traj.reward = reward
            traj.extra[SETTINGS_KEY] = settings
            for key, picture in ((ANSWER_KEY, answer), (REFERENCE_KEY, reference)):
                if picture.new:
                    traj.extra[key] = to_stored(picture.path, saved_path)
            errors = [
                f"{name}: {p.error}"
                for name, p in (("answer", answer), ("reference", reference))
                if p.error
            ]
            if errors:
                traj.extra[ERROR_KEY] = "; ".join(errors)
            else:
                traj.extra.pop(ERROR_KEY, None)

    def report(outcome):
        best, rewards = outcome.best, outcome.rewards
        similarity = 100.0 * sum(best) / len(best)
        metrics = {
            "similarity": similarity,
            "evaluated": outcome.scored,
            "rendered": render["rendered"],
            "render_failed": render["failed"],
            "clip": settings,
            "browser": arguments["browser_version"],
        }
        notes = ""
        if want_pairs:
            metrics["pairs"] = len(outcome.pairs)
            notes += f", {len(outcome.pairs)} preference pairs (gap >= {threshold:g})"
        if theirs is not None:
            metrics["win_rate"] = 100.0 * win_rate(best, theirs)
            notes += f", win rate {metrics['win_rate']:.1f}% vs {reference_path}"
        lines = [f"evaluate_html: {len(rewards)} trajectories ({outcome.num_tasks} tasks x {k}), "
                 f"best-of-{k} CLIP similarity {similarity:.1f}, scored {outcome.scored}, "
                 f"rendered {render['rendered']} ({render['failed']} failed), clip {settings}, "
                 f"browser {metrics['browser'] or 'not used'}{notes}"]
        # The original's lines, for scripts that read them: mean over every row (its
        # ``print(np.mean(similarities))``), the best-of-k mean as a fraction, the pair count.
        metrics["mean_reward"] = sum(rewards) / len(rewards)
        lines += [
            str(metrics["mean_reward"]),
            f"Best-of-{k} Average reward: {sum(best) / len(best)}",
        ]
        if want_pairs:
            lines.append(f"Number of preference pairs: {len(outcome.pairs)}")
        return metrics, lines

    metrics = evaluate("evaluate_html", saved_path, trajectories, k, todo, score,
                       lambda rewards, k: threshold_pairs(rewards, k, threshold), arguments,
                       preference_path, ground_truth_preference_path,
                       f"every trajectory already has a reward from {settings}", report)
    if vlm_preference_path:  # the pairs above, again: the rule is deterministic
        from sweet_rl.training.vlm_pairs import write_vlm_pairs

        pairs = threshold_pairs([t.reward for t in trajectories], k, threshold)
        write_vlm_pairs(vlm_preference_path, trajectories, pairs, saved_path, arguments)
    return metrics
