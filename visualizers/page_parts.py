"""Pieces shared by the dialogue viewers: escaping, the page frame, its CSS and filter script,
and screenshots embedded as data URLs (so a page stands alone and loads nothing).

Each viewer builds its own dialogue sections; the frame around them (header with counts and
filter buttons, a sidebar of links, previous/next links) is the same. The filter script knows
nothing about what a status means: a button with ``data-filter="X"`` shows the sections and
sidebar items whose ``data-status`` is ``X`` (``all`` shows every one).
"""

import base64
import html
import io
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple, Optional, Tuple

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class PageOptions(Options):
    """The page: which dialogues it shows, where it goes."""

    POSITIONAL = ("input_path", "output_path")
    input_path: str = flag(
        "trajectory JSONL (from simulate, optionally with rewards from evaluate).",
        aliases=("saved_path",))
    output_path: Optional[str] = flag(
        "the HTML page to write (default: INPUT_PATH with .html instead of .jsonl); "
        "``<output_path>.config.json`` records the arguments.", None)
    title: Optional[str] = flag(
        "page title (default: the kind of dialogues and the input file's name).", None)
    max_dialogues: Optional[int] = flag("show only the first N dialogues of the file.", None)

    def check(self) -> None:
        if self.max_dialogues is not None and self.max_dialogues < 0:
            raise ValueError(f"--max_dialogues must be a non-negative integer, got "
                             f"{self.max_dialogues!r}")

BASE_CSS = """
*{box-sizing:border-box}[hidden]{display:none!important}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:#1f2328;background:#f3f4f6}
header{padding:14px 22px;background:#24292f;color:#fff}
header h1{margin:0 0 6px;font-size:20px}
.summary span{margin-right:16px}.summary b{font-size:15px}
.filters{margin-top:10px}.filters button{margin-right:6px;padding:4px 12px;border:1px solid #8c959f;
border-radius:14px;background:#32383f;color:#fff;cursor:pointer}
.filters button.active{background:#fff;color:#24292f;font-weight:600}
.layout{display:flex;align-items:flex-start}
nav{position:sticky;top:0;width:230px;flex:none;max-height:100vh;overflow-y:auto;padding:12px;
background:#fff;border-right:1px solid #d0d7de}
nav ol{list-style:none;margin:0;padding:0}nav li a{display:block;padding:3px 6px;border-radius:5px;
color:#1f2328;text-decoration:none;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
nav li a:hover{background:#eaeef2}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px}
.dot.success{background:#1a7f37}.dot.failed{background:#cf222e}.dot.unevaluated{background:#8c959f}
main{flex:1;min-width:0;padding:16px 22px}
section.dialogue{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:0 0 20px;
padding:14px 18px}
section.dialogue:target{outline:3px solid #54aeff}
.head{display:flex;align-items:center;gap:10px;flex-wrap:wrap}.head h2{margin:0;font-size:17px}
.badge{padding:2px 10px;border-radius:12px;font-size:12px;font-weight:600;color:#fff}
.badge.success{background:#1a7f37}.badge.failed{background:#cf222e}
.badge.unevaluated{background:#6e7781}
.reward{font-weight:600}.steps{margin-left:auto}.steps a,.steps span{margin-left:10px}
.steps span{color:#8c959f}
h3{font-size:13px;text-transform:uppercase;letter-spacing:.04em;color:#57606a;margin:16px 0 6px}
.text{white-space:pre-wrap;word-wrap:break-word}
.turn{max-width:82%;margin:8px 0;padding:8px 12px;border-radius:10px}
.turn .role{font-size:11px;font-weight:700;text-transform:uppercase;color:#57606a;margin-bottom:3px}
.turn.user{background:#ddf4ff;border:1px solid #b6e3ff}
.turn.assistant{background:#f6f8fa;border:1px solid #d0d7de;margin-left:auto}
.turn.other{background:#fff8c5;border:1px solid #eac54f}
details{margin-top:6px}summary{cursor:pointer;color:#0969da;font-size:12px}
pre{margin:0;padding:10px;background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;
overflow-x:auto;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
white-space:pre-wrap;word-wrap:break-word}
.error{color:#cf222e;font-weight:600}.empty{color:#57606a}
"""

FILTER_JS = """
(function () {
  var buttons = document.querySelectorAll('.filters button');
  var sections = document.querySelectorAll('section.dialogue');
  var items = document.querySelectorAll('#dialogue-list li');
  var shown = document.getElementById('shown-count');
  function apply(filter) {
    var count = 0;
    sections.forEach(function (s) {
      var ok = filter === 'all' || s.getAttribute('data-status') === filter;
      s.hidden = !ok; if (ok) { count += 1; }
    });
    items.forEach(function (li) {
      li.hidden = !(filter === 'all' || li.getAttribute('data-status') === filter);
    });
    buttons.forEach(function (b) {
      var on = b.getAttribute('data-filter') === filter;
      b.classList.toggle('active', on); b.setAttribute('aria-pressed', on ? 'true' : 'false');
    });
    shown.textContent = String(count);
  }
  buttons.forEach(function (b) {
    b.addEventListener('click', function () { apply(b.getAttribute('data-filter')); });
  });
  // previous/next skip dialogues hidden by the filter; the plain href is the fallback
  document.querySelectorAll('.steps a').forEach(function (a) {
    a.addEventListener('click', function (event) {
      var forward = a.getAttribute('data-step') === 'next';
      var s = a.closest('section.dialogue');
      do { s = forward ? s.nextElementSibling : s.previousElementSibling; }
      while (s && (s.hidden || !s.classList.contains('dialogue')));
      if (s) { event.preventDefault(); location.hash = s.id; }
    });
  });
})();
"""


def esc(value: Any) -> str:
    """HTML-escape anything (``None`` -> empty), quotes included, for text and attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def folded(summary: str, text: Any, css_class: str = "") -> str:
    """``text`` as escaped source inside a closed ``<details>`` (``summary`` is trusted)."""
    attr = f' class="{css_class}"' if css_class else ""
    return f"<details><summary>{summary}</summary><pre{attr}>{esc(text)}</pre></details>"


def step_links(index: int, total: int) -> str:
    """The previous/next links of dialogue ``index`` (plain text at either end)."""
    prev_link = (f'<a href="#dialogue-{index - 1}" data-step="prev">&larr; previous</a>'
                 if index > 0 else "<span>&larr; previous</span>")
    next_link = (f'<a href="#dialogue-{index + 1}" data-step="next">next &rarr;</a>'
                 if index < total - 1 else "<span>next &rarr;</span>")
    return f'<span class="steps">{prev_link}{next_link}</span>'


def nav_item(index: int, status: str, problem_description: str) -> str:
    """A sidebar link to dialogue ``index``, labelled with the first line of its problem."""
    label = problem_description.strip().splitlines()[0] if problem_description.strip() else ""
    return (f'<li data-status="{status}"><a href="#dialogue-{index}" title="{esc(label)}">'
            f'<span class="dot {status}"></span>#{index} {esc(label[:60])}</a></li>')


def filter_buttons(options: Iterable[Tuple[str, str]]) -> str:
    """Buttons for ``(status, label)`` pairs after an active "all" button."""
    buttons = ['<button type="button" data-filter="all" class="active">all</button>']
    buttons += [f'<button type="button" data-filter="{key}">{label}</button>'
                for key, label in options]
    return "".join(buttons)


def page_document(title: str, summary: str, filters: str, nav_items: Iterable[str], body: str,
                  extra_css: str = "") -> str:
    """The whole page. ``summary``, ``filters``, ``nav_items`` and ``body`` are markup the
    caller built with everything from the file already escaped; ``title`` is escaped here."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{BASE_CSS}{extra_css}</style></head><body>"
        f'<header><h1>{esc(title)}</h1><div class="summary">{summary}</div>'
        f'<div class="filters">filter: {filters}</div></header>'
        f'<div class="layout"><nav><ol id="dialogue-list">{"".join(nav_items)}</ol></nav>'
        f"<main>{body}</main></div><script>{FILTER_JS}</script></body></html>\n"
    )


class Shot(NamedTuple):
    """A screenshot ready for the page."""

    url: Optional[str]  # data URL, or None when there is nothing to show
    note: str  # caption under the image, or why there is none


def image_data_url(data: bytes, width: int, max_height: int) -> Shot:
    """An embeddable image for screenshot bytes, cut to ``max_height`` source pixels and
    scaled to ``width`` (0: keep either). A PNG that needs neither is embedded as it is, any
    other result as JPEG (a tenth of the size for screenshots). Bytes that are not an image
    give a note, never an image."""
    try:
        from PIL import Image
    except ImportError:  # no Pillow: original PNGs only, checked by their signature
        if data[:8] != b"\x89PNG\r\n\x1a\n":
            return Shot(None, "no screenshot: the file is not a PNG")
        return Shot("data:image/png;base64," + base64.b64encode(data).decode("ascii"), "")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()  # decodes everything: a truncated file fails here
            kind = image.format
            picture = image.convert("RGB")
    except Exception as err:  # truncated, not an image, decompression bomb, ...
        return Shot(None, f"no screenshot: unreadable image ({type(err).__name__})")
    crop = bool(max_height) and picture.height > max_height
    scale = bool(width) and picture.width > width
    if kind == "PNG" and not crop and not scale:
        return Shot("data:image/png;base64," + base64.b64encode(data).decode("ascii"), "")
    note = ""
    if crop:
        note = f"top {max_height} of {picture.height} px shown"
        picture = picture.crop((0, 0, picture.width, max_height))
    if scale:
        height = max(1, round(picture.height * width / picture.width))
        picture = picture.resize((width, height), Image.LANCZOS)
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=85)
    return Shot("data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"),
                note)


def figure(shot: Shot, caption: str, css_class: str) -> str:
    """An image with its caption, or the note saying why there is none (``caption`` is trusted
    markup; the note is escaped)."""
    if shot.url is None:
        return (f'<figure class="{css_class}"><div class="noshot">{esc(shot.note)}</div>'
                f"<figcaption>{caption}</figcaption></figure>")
    extra = f" ({esc(shot.note)})" if shot.note else ""
    return (f'<figure class="{css_class}"><img alt="{caption}" src="{shot.url}">'
            f"<figcaption>{caption}{extra}</figcaption></figure>")


def viewer_output(input_path: str, output_path: Optional[str]) -> str:
    """A viewer's page: OUTPUT_PATH, or without one beside the input (``run.jsonl`` ->
    ``run.html``), as the one-argument commands of the original README expect."""
    import os

    if output_path is None:
        return os.path.splitext(input_path)[0] + ".html"
    if os.path.isdir(output_path):  # the original design viewer's 2nd argument: temp_path
        raise ValueError(f"OUTPUT_PATH {output_path} is a folder: give the page's file name (a "
                         "screenshot folder of the original's commands goes in --temp_path)")
    return output_path


BACKEND, FRONTEND = "backend", "frontend"
_VIEWERS = {BACKEND: "visualizers/visualize_dialogue_histories.py",
            FRONTEND: "visualizers/visualize_design_dialogue_histories.py"}
_WORDS = {BACKEND: "backend (code)", FRONTEND: "frontend (design)"}


class WrongViewer(ValueError):
    """The file belongs to the other viewer (a ValueError: the command line prints its one
    line and exits 2, before anything is written)."""


def _frontend_marks(traj) -> bool:
    from sweet_rl.rendering.pictures import ANSWER_KEY, REFERENCE_KEY

    return (ANSWER_KEY in traj.extra or REFERENCE_KEY in traj.extra
            or traj.task.ground_truth.lstrip().startswith("<")
            or any("screenshot" in turn.extra or "html" in turn.extra
                   for turn in traj.dialogue_history))


def file_kind(trajectories) -> Optional[str]:
    """``backend``, ``frontend`` or None (cannot tell) for a file's trajectories.

    The rule: a file with any row whose task has ``test_cases`` is backend (every backend task
    carries its hidden unit tests, which grading needs; frontend tasks have none). Otherwise a
    file with any row that carries a screenshot key (``answer_screenshot`` or
    ``reference_screenshot`` on the row, ``screenshot`` or ``html`` on a turn) or whose
    reference is markup (starts with ``<``; a Python reference never does) is frontend.
    Anything else is left to whichever viewer was asked: neither refuses it."""
    if any(traj.task.test_cases is not None for traj in trajectories):
        return BACKEND
    if any(_frontend_marks(traj) for traj in trajectories):
        return FRONTEND
    return None


def refuse_other_kind(path: str, trajectories, wanted: str) -> None:
    """Raise :class:`WrongViewer` naming the file and the viewer to use, when the file is
    of the other kind than ``wanted`` (see :func:`file_kind`)."""
    kind = file_kind(trajectories)
    if kind is not None and kind != wanted:
        raise WrongViewer(f"{path} holds {_WORDS[kind]} dialogues, not {_WORDS[wanted]} ones: "
                          f"view it with {_VIEWERS[kind]}")
