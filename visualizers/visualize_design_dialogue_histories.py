#!/usr/bin/env python
"""Render a frontend (design) trajectory JSONL as one static, self-contained HTML page.

    python visualizers/visualize_design_dialogue_histories.py outputs/html_eval.jsonl \
        outputs/html_eval.html [--max_dialogues 50] [--render_missing]
    python visualizers/visualize_design_dialogue_histories.py outputs/html_eval.jsonl  # -> .html

Per dialogue: the turns, each agent page shown as its screenshot inline, the final page beside
the reference page, and the similarity (``reward``); a summary and the filter of the backend
viewer on top. Screenshots come from the paths stored in the file (``screenshot``,
``answer_screenshot``, ``reference_screenshot``, relative to the JSONL's folder), else from the
run's screenshot folder by content name; a page without one shows a "no screenshot" note, or
is rendered now with ``--render_missing`` (offline headless browser).

Images are embedded as data URLs, so the page stands alone and loads nothing from the network.
To keep a page of many dialogues loadable, each screenshot is cut to its top
``--max_image_height`` pixels and scaled to ``--image_width`` pixels wide (JPEG, with Pillow);
``--image_width 0 --max_image_height 0`` embeds the original PNGs. The agent's HTML is never
inserted as markup: it appears only as escaped source in a folded ``<details>``. A turn whose
``content`` holds the whole page (the original's rows, and ours) shows the text with the page
cut out (``[SEE RENDERED HTML]`` in its place), the screenshot under it and the source folded.
Rows of the original code also load: ``answer`` is then the final screenshot's path, or
``"No answer"`` when the agent never showed a page.

The original served the dialogues with a gradio app; this writes one static page instead.
A backend (code) file is refused with a line naming the backend viewer
(:func:`visualizers.page_parts.file_kind` says how the two are told apart).
"""

import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

if importlib.util.find_spec("sweet_rl") is None or importlib.util.find_spec("visualizers") is None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.environments.html_snippet import split_page  # noqa: E402
from sweet_rl.environments.protocol import NO_ANSWER  # noqa: E402
from sweet_rl.flags import flag  # noqa: E402
from sweet_rl.io import write_bytes  # noqa: E402
from sweet_rl.records import RecordError, Trajectory  # noqa: E402
from sweet_rl.rendering.pictures import ANSWER_KEY, REFERENCE_KEY  # noqa: E402
from sweet_rl.rendering.screenshots import default_screenshot_dir, resolve, screenshot_path  # noqa: E402
from visualizers.page_parts import (  # noqa: E402
    FRONTEND, PageOptions, Shot, esc, figure, filter_buttons, folded, image_data_url, nav_item,
    page_document, refuse_other_kind, step_links, viewer_output,
)

EVALUATED, UNEVALUATED, NO_PAGE = "evaluated", "unevaluated", "nopage"
_BADGE = {EVALUATED: "evaluated", UNEVALUATED: "not evaluated", NO_PAGE: "no final page"}
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_MAX_FILE_BYTES = 64 * 1024 * 1024  # a stored path is input: never slurp an arbitrary huge file

_CSS = """
.dot.evaluated,.badge.evaluated{background:#1a7f37}.dot.nopage,.badge.nopage{background:#bf8700}
figure{margin:8px 0}figure img{display:block;max-width:100%;height:auto;border:1px solid #d0d7de;
background:#fff}figcaption{font-size:12px;color:#57606a;margin-top:3px}
.turn figure img{max-width:min(100%,480px)}
.pair{display:flex;gap:16px;align-items:flex-start}.pair figure{flex:1;min-width:0}
.noshot{padding:14px;border:1px dashed #8c959f;border-radius:6px;color:#57606a;background:#fff}
"""


class Screenshots:
    """Finds, loads and encodes each page's screenshot once; counts what it could show."""

    def __init__(self, jsonl_path: str, width: int, max_height: int,
                 rendered: Optional[Dict[str, Any]] = None):
        self.jsonl_path, self.width, self.max_height = jsonl_path, width, max_height
        self.folder = default_screenshot_dir(jsonl_path)
        self.rendered = rendered or {}
        self.cache: Dict[Any, Shot] = {}
        self.shown = self.missing = 0

    def locate(self, stored: Optional[str], html: Optional[str], kind: str) -> Optional[str]:
        """The file on disk: the stored path, else the content-named file in the run's folder."""
        path = resolve(stored, self.jsonl_path)
        if path and os.path.isfile(path):
            return path
        if html:
            guess = screenshot_path(self.folder, html, kind)
            if os.path.isfile(guess):
                return guess
        return None

    def get(self, stored: Optional[str], html: Optional[str], kind: str = "page") -> Shot:
        path = self.locate(stored, html, kind)
        key = ("file", path) if path else ("html", html, stored)
        if key not in self.cache:
            self.cache[key] = self._load(path, stored, html)
        shot = self.cache[key]
        self.shown += shot.url is not None
        self.missing += shot.url is None
        return shot

    def _load(self, path: Optional[str], stored: Optional[str], html: Optional[str]) -> Shot:
        if path:
            if os.path.getsize(path) > _MAX_FILE_BYTES:
                return Shot(None, f"no screenshot: {stored or path} is over 64 MB")
            with open(path, "rb") as handle:
                return image_data_url(handle.read(), self.width, self.max_height)
        result = self.rendered.get(html) if html else None
        if result is not None:
            if not result.ok:
                return Shot(None, f"no screenshot: rendering failed ({result.error})")
            return image_data_url(result.png, self.width, self.max_height)
        if stored:
            return Shot(None, f"no screenshot: {stored} not found")
        return Shot(None, "no screenshot recorded")


def turn_page(turn):
    """(text to show, page HTML or None) of a turn. The page is the turn's ``html`` key, else
    the page its ``content`` holds (an agent turn keeps the whole page there); either way the
    page is cut out of the text, the placeholder standing in its place."""
    if turn.role != "assistant":
        return turn.content, turn.extra.get("html")
    text, in_content = split_page(turn.content)
    return text, turn.extra.get("html") or in_content


def final_page(traj: Trajectory):
    """(html, stored screenshot) of the dialogue's last page; old files may hold an image path
    in ``answer`` instead of HTML. (None, None) when the agent never showed a page."""
    answer = traj.answer.strip()
    stored = traj.extra.get(ANSWER_KEY)
    if answer and "<" not in answer and answer.lower().endswith(_IMAGE_SUFFIXES):
        return None, stored or answer
    if not answer or answer == NO_ANSWER:
        return None, stored
    if not stored:  # the last page the agent showed is also the final page
        stored = next((t.extra.get("screenshot") for t in reversed(traj.dialogue_history)
                       if turn_page(t)[1] == traj.answer), None)
    return traj.answer, stored


def status(traj: Trajectory) -> str:
    html, stored = final_page(traj)
    if html is None and stored is None:
        return NO_PAGE
    return UNEVALUATED if traj.reward is None else EVALUATED


def _turn_html(turn, shots: Screenshots, number: int) -> str:
    role = turn.role if turn.role in ("user", "assistant") else "other"
    text, page = turn_page(turn)
    parts = [f'<div class="turn {role}"><div class="role">{esc(turn.role)}</div>',
             f'<div class="text">{esc(text)}</div>']
    if page is not None or turn.extra.get("screenshot"):
        shot = shots.get(turn.extra.get("screenshot"), page)
        if shot.url is None and turn.extra.get("render_error"):  # simulate's reason, if any
            shot = Shot(None, f"no screenshot: the page did not render "
                              f"({turn.extra['render_error']})")
        parts.append(figure(shot, f"page shown at turn {number}", "turn-page"))
    if page is not None:
        parts.append(folded("page HTML (source, not rendered)", page, "page-source"))
    if turn.input is not None:
        parts.append(folded("prompt the agent saw", turn.input))
    if turn.output is not None:
        parts.append(folded("raw model output", turn.output))
    return "".join(parts) + "</div>"


def _dialogue_html(index: int, total: int, traj: Trajectory, shots: Screenshots) -> str:
    state = status(traj)
    similarity = "not evaluated" if traj.reward is None else f"{traj.reward:.3f}"
    error = traj.extra.get("error")
    error_html = f'<p class="error">error: {esc(error)}</p>' if error is not None else ""
    turns = "".join(_turn_html(t, shots, n) for n, t in enumerate(traj.dialogue_history))
    html, stored = final_page(traj)
    final = (figure(shots.get(stored, html), "final page", "final") if state != NO_PAGE else
             figure(Shot(None, "the agent showed no page"), "final page", "final"))
    reference = figure(shots.get(traj.extra.get(REFERENCE_KEY), traj.task.ground_truth,
                                  "reference"), "reference page", "reference")
    return (
        f'<section class="dialogue" id="dialogue-{index}" data-status="{state}">'
        f'<div class="head"><h2>Dialogue #{index}</h2>'
        f'<span class="badge {state}">{_BADGE[state]}</span>'
        f'<span class="reward">similarity: {similarity}</span>'
        f"{step_links(index, total)}</div>{error_html}"
        f'<h3>Problem description</h3><div class="text">{esc(traj.task.problem_description)}</div>'
        f"<h3>Dialogue ({len(traj.dialogue_history)} turns)</h3>"
        f'{turns or "<p class=empty>(no turns)</p>"}'
        f'<h3>Final page and reference (similarity {similarity})</h3>'
        f'<div class="pair">{final}{reference}</div>'
        f'{folded("final page HTML", html or traj.answer or "(none)", "answer")}'
        f'{folded("reference HTML", traj.task.ground_truth, "reference")}'
        "</section>"
    )


def parse(data: Any) -> Trajectory:
    """A trajectory whose page keys, where present, are strings (or null)."""
    traj = Trajectory.from_dict(data)
    for key in (ANSWER_KEY, REFERENCE_KEY):
        if traj.extra.get(key) is not None and not isinstance(traj.extra[key], str):
            raise RecordError(f"expected a path string, got {type(traj.extra[key]).__name__}",
                              field=key)
    for i, turn in enumerate(traj.dialogue_history):
        for key in ("html", "screenshot"):
            if turn.extra.get(key) is not None and not isinstance(turn.extra[key], str):
                raise RecordError(f"expected a string, got {type(turn.extra[key]).__name__}",
                                  field=f"dialogue_history[{i}].{key}")
    return traj


def summarize(trajectories: List[Trajectory]) -> Dict[str, Any]:
    """Counts for the header: dialogues, per status, mean similarity over evaluated ones."""
    states = [status(t) for t in trajectories]
    rewards = [t.reward for t in trajectories if t.reward is not None]
    return {"total": len(trajectories), "evaluated": len(rewards),
            "nopage": states.count(NO_PAGE),
            "mean": sum(rewards) / len(rewards) if rewards else None}


def render_design_html(trajectories: List[Trajectory], title: str, shots: Screenshots) -> str:
    """The whole page (``shots`` knows where the screenshots of ``trajectories`` are)."""
    sections = [_dialogue_html(i, len(trajectories), t, shots) for i, t in enumerate(trajectories)]
    nav = [nav_item(i, status(t), t.task.problem_description) for i, t in enumerate(trajectories)]
    stats = summarize(trajectories)
    mean = "n/a" if stats["mean"] is None else f"{stats['mean']:.3f}"
    summary = (f'<span><b id="count-total">{stats["total"]}</b> dialogues</span>'
               f'<span><b id="count-evaluated">{stats["evaluated"]}</b> evaluated</span>'
               f'<span><b id="count-nopage">{stats["nopage"]}</b> without a final page</span>'
               f'<span>mean similarity <b id="mean-similarity">{mean}</b></span>'
               f'<span>screenshots <b id="count-shown">{shots.shown}</b> shown, '
               f'<b id="count-missing">{shots.missing}</b> missing</span>'
               f'<span>showing <b id="shown-count">{stats["total"]}</b></span>')
    filters = filter_buttons(((EVALUATED, "evaluated"), (UNEVALUATED, "not evaluated"),
                              (NO_PAGE, "no final page")))
    body = "".join(sections) or '<p class="empty">No dialogues in this file.</p>'
    return page_document(title, summary, filters, nav, body, extra_css=_CSS)


def pages_without_screenshot(trajectories: List[Trajectory], shots: Screenshots) -> List[str]:
    """HTML of every page the file shows but has no screenshot file for (each once)."""
    wanted = []
    for traj in trajectories:
        for turn in traj.dialogue_history:
            page = turn_page(turn)[1]
            if page and not shots.locate(turn.extra.get("screenshot"), page, "page"):
                wanted.append(page)
        html, stored = final_page(traj)
        if html and not shots.locate(stored, html, "page"):
            wanted.append(html)
        if not shots.locate(traj.extra.get(REFERENCE_KEY), traj.task.ground_truth,
                            "reference"):
            wanted.append(traj.task.ground_truth)
    return list(dict.fromkeys(wanted))


@dataclass(kw_only=True)
class DesignViewerOptions(PageOptions):
    """Write OUTPUT_PATH (HTML) showing the design dialogues of INPUT_PATH (frontend
    trajectory JSONL, from simulate --task_type html)."""

    image_width: int = flag(
        "screenshots are scaled down to this width in pixels (0: original size).", 640)
    max_image_height: int = flag(
        "only the top this-many source pixels of a screenshot are shown (0: all).", 3000)
    render_missing: bool = flag(
        "render the pages that have no screenshot file (headless browser).", False)
    pool_size: Optional[int] = flag("browsers at once, for --render_missing.", None)
    assets_dir: Optional[str] = flag("the Tailwind cache, for --render_missing.", None)
    temp_path: Optional[str] = flag(
        "the original's scratch folder for screenshots; not used (pages render in memory), a "
        "notice says so.", None)
    train: Optional[bool] = flag("accepted; it had no effect in the original either.", None)

    def check(self) -> None:
        for name in ("image_width", "max_image_height"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"--{name} must be a non-negative integer, got {value!r}")


def visualize_design(opts: DesignViewerOptions) -> str:
    """Write the page and its sidecar, print one line; returns the page's path."""
    from sweet_rl.io import read_jsonl, write_sidecar
    from sweet_rl.notices import notice_once

    input_path = opts.input_path
    output_path = viewer_output(input_path, opts.output_path)
    if opts.temp_path is not None:
        notice_once("--temp_path not used: missing pages render in memory (--render_missing)")
    if opts.train is not None:
        notice_once("--train has no effect on the viewer (it had none in the original code)")
    arguments = dict(opts.flags(), input_path=input_path, output_path=output_path)
    for unused in ("temp_path", "train"):
        arguments.pop(unused)
    if os.path.abspath(input_path) == os.path.abspath(output_path):
        raise ValueError(f"output path {output_path} is the input file; refusing to overwrite it")
    trajectories = read_jsonl(input_path, parse=parse)  # validates, names file/line/field
    refuse_other_kind(input_path, trajectories, FRONTEND)  # a backend file: the other viewer
    if opts.max_dialogues is not None:
        trajectories = trajectories[:opts.max_dialogues]
    shots = Screenshots(input_path, opts.image_width, opts.max_image_height)
    if opts.render_missing:
        _render_missing(trajectories, shots, opts)
    title = (opts.title if opts.title is not None
             else f"Design dialogues: {os.path.basename(input_path)}")
    page = render_design_html(trajectories, title, shots)
    write_bytes(output_path, page.encode("utf-8"))
    write_sidecar(output_path, arguments, "visualize_design_dialogue_histories")
    stats = summarize(trajectories)
    mean = "n/a" if stats["mean"] is None else f"{stats['mean']:.3f}"
    print(f"visualized {stats['total']} design dialogues ({stats['evaluated']} evaluated, mean "
          f"similarity {mean}; {shots.shown} screenshots shown, {shots.missing} missing) "
          f"-> {output_path}")
    return output_path


def _render_missing(trajectories, shots, opts: DesignViewerOptions) -> None:
    from sweet_rl.rendering.page_checks import open_pool, render_in_order

    pages = pages_without_screenshot(trajectories, shots)
    if not pages:
        return
    try:
        pool, _ = open_pool(opts.pool_size, assets_dir=opts.assets_dir)
    except RuntimeError as err:  # no browser here: one line, non-zero exit, no page
        raise SystemExit(f"error: {err}") from None
    try:
        shots.rendered = dict(zip(pages, render_in_order(pool, pages, "missing pages")))
    finally:
        pool.close()


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(visualize_design, DesignViewerOptions, argv)


if __name__ == "__main__":
    main()
