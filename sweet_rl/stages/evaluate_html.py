"""Stage: score frontend trajectories by CLIP similarity with the reference page.

Writes ``reward`` (cosine similarity of the final page's CLIP image embedding with the
reference page's) into the trajectory file, prints the best-of-k similarity (x100, as in the
paper), optionally writes the critic's trajectory-level preference pairs (rollouts of a task
whose rewards differ by at least ``--threshold``) and the win rate against another run.
Which picture scores each row, and how: :mod:`sweet_rl.evaluation.page_scores`. Rows that
already carry a reward from the same CLIP settings are kept, so a second run costs nothing
and an interrupted one redoes only what it had not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from sweet_rl.evaluation.clip_similarity import CROPS
from sweet_rl.evaluation.keys import ERROR_KEY, SETTINGS_KEY
from sweet_rl.flags import flag
from sweet_rl.stages.evaluation import Evaluation, Outcome, run_evaluation
from sweet_rl.stages.groups import EvaluateOptions, RenderOptions


@dataclass(kw_only=True)
class EvaluateHtmlOptions(EvaluateOptions, RenderOptions):
    """Score a frontend trajectory file in place and print the metrics line.

    Example:
        python scripts/evaluate_html.py outputs/html.jsonl --k 2 \\
            --ground_truth_preference_path outputs/html_critic_pairs.jsonl

    Printed at the end: our summary line, then the original's three lines -- the mean
    similarity over all rows as a bare number, ``Best-of-k Average reward: X`` and, when pairs
    are written, ``Number of preference pairs: N``.
    """

    POSITIONAL = ("saved_path", "k", "temp_path", "preference_path",
                  "ground_truth_preference_path")
    temp_path: Optional[str] = flag(
        "the original code's folder for rendered screenshots: used as --screenshot_dir when "
        "that is not given (the positions of the original's arguments are kept: SAVED_PATH K "
        "TEMP_PATH PREFERENCE_PATH GROUND_TRUTH_PREFERENCE_PATH).", None)
    reference_path: Optional[str] = flag(
        "another evaluated run on the same tasks; prints the win rate against it.", None)
    clip_model: str = flag("the open_clip model that embeds the pictures.", "ViT-B-32")
    clip_pretrained: str = flag(
        "its weights: an open_clip tag, a local checkpoint file, or ``none`` for random "
        "weights drawn with --seed.", "openai")
    crop: str = flag(
        "``center`` (the original's: middle square of the page) or ``squash`` (whole page).",
        "center", choices=CROPS)
    batch_size: int = flag("pictures per CLIP forward pass.", 32)
    screenshot_dir: Optional[str] = flag(
        "where screenshots go (default ``<saved_path stem>_screenshots``).", None)
    device: Optional[str] = flag("torch device (default cuda when available).", None)
    threshold: float = flag(
        "the smallest reward gap between two rollouts of a task that makes a pair.", 0.1)
    seed: int = flag("the seed of random CLIP weights (``--clip_pretrained none``).", 0)
    train: Optional[bool] = flag(
        "accepted for the original's command lines; it had no effect there either.", None)
    vlm_preference_path: Optional[str] = flag(
        "the same pairs for the vision-language critic (train_dpo.py --critic_head "
        "vlm_regression): each side is {\"image\": the row's reference screenshot, \"text\": "
        "input + output of the last agent turn} (sweet_rl/training/vlm_pairs.py); pairs whose "
        "reference did not render are left out, with a warning.", None)

    def check(self) -> None:
        if self.threshold < 0 or self.batch_size < 1:
            raise ValueError("--threshold must be >= 0 and --batch_size >= 1")


class HtmlEvaluation(Evaluation):
    """CLIP similarity with the reference page; threshold pairs; the win rate against another
    run."""

    stage = "evaluate_html"

    def __init__(self, opts: EvaluateHtmlOptions):
        from sweet_rl.evaluation.clip_similarity import NO_WEIGHTS, settings_tag
        from sweet_rl.evaluation.page_scores import earlier_browser

        super().__init__(opts)
        self.pretrained = (None if opts.clip_pretrained.lower() in NO_WEIGHTS
                           else opts.clip_pretrained)
        self.settings = settings_tag(opts.clip_model, self.pretrained, opts.crop, opts.seed)
        self.render = {"rendered": 0, "failed": 0, "browsers": set()}
        self.theirs = None
        # the sidecars name the browser that rendered these pages: this run's, else an earlier's
        self.arguments.update(clip_settings=self.settings,
                              browser_version=earlier_browser(opts.saved_path))
        self.want_pairs = bool(opts.preference_path or opts.ground_truth_preference_path
                               or opts.vlm_preference_path)

    def check_rows(self, path, trajectories) -> None:
        from sweet_rl.evaluation.page_scores import check_frontend_rows

        check_frontend_rows(path, trajectories, self.want_pairs)

    def prepare(self, trajectories) -> None:
        from sweet_rl.evaluation.page_scores import reference_best
        from sweet_rl.layout import task_count

        if self.opts.reference_path:
            num_tasks = task_count(len(trajectories), self.opts.k)
            self.theirs = reference_best(self.opts.reference_path, trajectories, num_tasks,
                                         self.settings)

    def needs_score(self, trajectory) -> bool:
        from sweet_rl.evaluation.page_scores import settings_of

        return trajectory.reward is None or settings_of(trajectory) != self.settings

    def nothing_to_score(self) -> str:
        return f"every trajectory already has a reward from {self.settings}"

    def score(self, trajectories, rows) -> None:
        from sweet_rl.evaluation.clip_similarity import load_clip
        from sweet_rl.evaluation.page_scores import final_picture, similarities
        from sweet_rl.rendering.pictures import (drop_unreadable, reference_picture,
                                                 render_pending)
        from sweet_rl.rendering.screenshots import default_screenshot_dir

        opts, path = self.opts, self.opts.saved_path
        directory = opts.screenshot_dir or opts.temp_path or default_screenshot_dir(path)
        answers = [final_picture(trajectories[i], path, directory) for i in rows]
        references = [reference_picture(trajectories[i], path, directory) for i in rows]
        scorer = load_clip(opts.clip_model, self.pretrained, opts.crop, opts.device,
                           opts.seed)  # fails fast
        self.render.update(render_pending(answers + references, opts.browser, opts.pool_size,
                                          opts.assets_dir, opts.page_load_timeout))
        if self.render["browsers"]:
            self.arguments["browser_version"] = ", ".join(sorted(self.render["browsers"]))
        drop_unreadable(answers + references)
        rewards = similarities(scorer, [p.path for p in answers], [p.path for p in references],
                               opts.batch_size)
        for i, answer, reference, reward in zip(rows, answers, references, rewards):
            _record(trajectories[i], answer, reference, reward, self.settings, path)

    def pairs(self, rewards, k):
        from sweet_rl.evaluation.preferences import threshold_pairs

        return threshold_pairs(rewards, k, self.opts.threshold)

    def report(self, outcome: Outcome):
        from sweet_rl.evaluation.preferences import win_rate

        opts, best, rewards, render = self.opts, outcome.best, outcome.rewards, self.render
        similarity = 100.0 * sum(best) / len(best)
        metrics = {"similarity": similarity, "evaluated": outcome.scored,
                   "rendered": render["rendered"], "render_failed": render["failed"],
                   "clip": self.settings, "browser": self.arguments["browser_version"]}
        notes = ""
        if self.want_pairs:
            metrics["pairs"] = len(outcome.pairs)
            notes += f", {len(outcome.pairs)} preference pairs (gap >= {opts.threshold:g})"
        if self.theirs is not None:
            metrics["win_rate"] = 100.0 * win_rate(best, self.theirs)
            notes += f", win rate {metrics['win_rate']:.1f}% vs {opts.reference_path}"
        lines = [f"evaluate_html: {len(rewards)} trajectories ({outcome.num_tasks} tasks x "
                 f"{outcome.k}), best-of-{outcome.k} CLIP similarity {similarity:.1f}, scored "
                 f"{outcome.scored}, rendered {render['rendered']} ({render['failed']} failed), "
                 f"clip {self.settings}, browser {metrics['browser'] or 'not used'}{notes}"]
        # The original's lines, for scripts that read them: mean over every row (its
        # ``print(np.mean(similarities))``), the best-of-k mean as a fraction, the pair count.
        metrics["mean_reward"] = sum(rewards) / len(rewards)
        lines += [str(metrics["mean_reward"]),
                  f"Best-of-{outcome.k} Average reward: {sum(best) / len(best)}"]
        if self.want_pairs:
            lines.append(f"Number of preference pairs: {len(outcome.pairs)}")
        return metrics, lines


def _record(traj, answer, reference, reward: float, settings: str, saved_path: str) -> None:
    """A scored row: its reward, the settings, new screenshot paths and any render error."""
    from sweet_rl.rendering.pictures import ANSWER_KEY, REFERENCE_KEY
    from sweet_rl.rendering.screenshots import to_stored

    traj.reward = reward
    traj.extra[SETTINGS_KEY] = settings
    for key, picture in ((ANSWER_KEY, answer), (REFERENCE_KEY, reference)):
        if picture.new:
            traj.extra[key] = to_stored(picture.path, saved_path)
    errors = [f"{name}: {p.error}" for name, p in (("answer", answer), ("reference", reference))
              if p.error]
    if errors:
        traj.extra[ERROR_KEY] = "; ".join(errors)
    else:
        traj.extra.pop(ERROR_KEY, None)


def evaluate_html(opts: EvaluateHtmlOptions) -> Dict:
    """Score the file in place, write pairs and sidecars, print the lines; the metrics."""
    from sweet_rl.notices import notice_once

    if opts.train is not None:
        notice_once("--train has no effect on evaluation (it had none in the original code)")
    if opts.temp_path is not None:
        notice_once(f"--temp_path (the original's screenshot folder): rendered pages go to "
                    f"{opts.temp_path}" if opts.screenshot_dir is None else
                    "--temp_path ignored: --screenshot_dir names the screenshot folder")
    evaluation = HtmlEvaluation(opts)
    metrics, trajectories = run_evaluation(evaluation)
    if opts.vlm_preference_path:  # the pairs above, again: the rule is deterministic
        from sweet_rl.training.vlm_pairs import write_vlm_pairs

        pairs = evaluation.pairs([t.reward for t in trajectories], opts.k)
        write_vlm_pairs(opts.vlm_preference_path, trajectories, pairs, opts.saved_path,
                        evaluation.arguments)
    return metrics
