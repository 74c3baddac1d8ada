#!/usr/bin/env python
"""Render a trajectory JSONL as one static, self-contained HTML page for reading dialogues.

    python visualizers/visualize_dialogue_histories.py outputs/eval.jsonl outputs/eval.html \
        [--title "My run"] [--max_dialogues 50]

The page has a counts summary, a sidebar with one link per dialogue, an inline-JS filter
(all / successful / failed / not evaluated) and, per dialogue, its index (0-based position in
the file), the problem description, the turns (assistant prompt and raw output folded away in
``<details>``), the final answer, the hidden reference solution, the reward and a badge.
Everything taken from the file is HTML-escaped; no user text ever reaches a script or attribute
unescaped. CSS and JS are inline: the page needs no server and loads nothing from the network.
"""

import contextlib
import html
import importlib.util
import os
import sys
import tempfile
from typing import Any, Dict, List, Optional

if importlib.util.find_spec("sweet_rl") is None:  # run as a script from a plain checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.records import Trajectory  # noqa: E402

SUCCESS, FAILED, UNEVALUATED = "success", "failed", "unevaluated"
_BADGE = {SUCCESS: "success", FAILED: "fail", UNEVALUATED: "not evaluated"}

_CSS = """
*{box-sizing:border-box}[hidden]{display:none!important}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f3f4f6}
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
section.dialogue{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:0 0 20px;padding:14px 18px}
section.dialogue:target{outline:3px solid #54aeff}
.head{display:flex;align-items:center;gap:10px;flex-wrap:wrap}.head h2{margin:0;font-size:17px}
.badge{padding:2px 10px;border-radius:12px;font-size:12px;font-weight:600;color:#fff}
.badge.success{background:#1a7f37}.badge.failed{background:#cf222e}.badge.unevaluated{background:#6e7781}
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
pre{margin:0;padding:10px;background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;overflow-x:auto;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;word-wrap:break-word}
.error{color:#cf222e;font-weight:600}.empty{color:#57606a}
"""

_JS = """
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


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _status(reward: Optional[float]) -> str:
    if reward is None:
        return UNEVALUATED
    return SUCCESS if abs(reward - 1.0) < 1e-9 else FAILED


def _turn_html(turn) -> str:
    role = turn.role if turn.role in ("user", "assistant") else "other"
    parts = [f'<div class="turn {role}"><div class="role">{_esc(turn.role)}</div>',
             f'<div class="text">{_esc(turn.content)}</div>']
    if turn.input is not None:
        parts.append(f"<details><summary>prompt the agent saw</summary><pre>{_esc(turn.input)}</pre></details>")
    if turn.output is not None:
        parts.append(f"<details><summary>raw model output</summary><pre>{_esc(turn.output)}</pre></details>")
    parts.append("</div>")
    return "".join(parts)


def _dialogue_html(index: int, total: int, traj: Trajectory, error: Any) -> str:
    status = _status(traj.reward)
    reward_text = "not evaluated" if traj.reward is None else f"{traj.reward:.3f}"
    prev_link = (f'<a href="#dialogue-{index - 1}" data-step="prev">&larr; previous</a>'
                 if index > 0 else "<span>&larr; previous</span>")
    next_link = (f'<a href="#dialogue-{index + 1}" data-step="next">next &rarr;</a>'
                 if index < total - 1 else "<span>next &rarr;</span>")
    turns = "".join(_turn_html(t) for t in traj.dialogue_history) or '<p class="empty">(no turns)</p>'
    error_html = f'<p class="error">error: {_esc(error)}</p>' if error is not None else ""
    return (
        f'<section class="dialogue" id="dialogue-{index}" data-status="{status}">'
        f'<div class="head"><h2>Dialogue #{index}</h2>'
        f'<span class="badge {status}">{_BADGE[status]}</span>'
        f'<span class="reward">reward: {reward_text}</span>'
        f'<span class="steps">{prev_link}{next_link}</span></div>{error_html}'
        f'<h3>Problem description</h3><div class="text">{_esc(traj.task.problem_description)}</div>'
        f'<h3>Dialogue ({len(traj.dialogue_history)} turns)</h3>{turns}'
        f'<h3>Final answer</h3><pre class="answer">{_esc(traj.answer) or "(no answer)"}</pre>'
        f'<h3>Hidden reference (ground truth)</h3><pre class="reference">{_esc(traj.task.ground_truth)}</pre>'
        "</section>"
    )


def summarize(trajectories: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Counts shown at the top of the page: total, per status, and mean reward over evaluated."""
    rewards = [Trajectory.from_dict(d).reward for d in trajectories]
    evaluated = [r for r in rewards if r is not None]
    statuses = [_status(r) for r in rewards]
    return {"total": len(rewards), "successful": statuses.count(SUCCESS),
            "failed": statuses.count(FAILED), "unevaluated": statuses.count(UNEVALUATED),
            "mean_reward": sum(evaluated) / len(evaluated) if evaluated else None}


def render_dialogues_html(trajectories: List[Dict[str, Any]], title: str) -> str:
    """Return the whole page for ``trajectories`` (trajectory dicts as stored in the JSONL)."""
    parsed = [Trajectory.from_dict(d) for d in trajectories]
    stats = summarize(trajectories)
    mean = "n/a" if stats["mean_reward"] is None else f"{stats['mean_reward']:.3f}"
    nav_items, sections = [], []
    for i, traj in enumerate(parsed):
        status = _status(traj.reward)
        label = traj.task.problem_description.strip().splitlines()[0] if traj.task.problem_description.strip() else ""
        nav_items.append(f'<li data-status="{status}"><a href="#dialogue-{i}" title="{_esc(label)}">'
                         f'<span class="dot {status}"></span>#{i} {_esc(label[:60])}</a></li>')
        sections.append(_dialogue_html(i, len(parsed), traj, traj.extra.get("error")))
    body = "".join(sections) or '<p class="empty">No dialogues in this file.</p>'
    filters = "".join(
        f'<button type="button" data-filter="{key}"{active}>{label}</button>'
        for key, label, active in (("all", "all", ' class="active"'), (SUCCESS, "successful", ""),
                                      (FAILED, "failed", ""), (UNEVALUATED, "not evaluated", "")))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
        f'<header><h1>{_esc(title)}</h1><div class="summary">'
        f'<span><b id="count-total">{stats["total"]}</b> dialogues</span>'
        f'<span><b id="count-successful">{stats["successful"]}</b> successful</span>'
        f'<span><b id="count-failed">{stats["failed"]}</b> failed</span>'
        f'<span><b id="count-unevaluated">{stats["unevaluated"]}</b> not evaluated</span>'
        f'<span>mean reward <b id="mean-reward">{mean}</b></span>'
        f'<span>showing <b id="shown-count">{stats["total"]}</b></span></div>'
        f'<div class="filters">filter: {filters}</div></header>'
        f'<div class="layout"><nav><ol id="dialogue-list">{"".join(nav_items)}</ol></nav>'
        f"<main>{body}</main></div><script>{_JS}</script></body></html>\n"
    )


def _write_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".html", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def main(input_path: str, output_path: str, title: Optional[str] = None,
         max_dialogues: Optional[int] = None) -> None:
    """Write OUTPUT_PATH (HTML) showing the dialogues of INPUT_PATH (trajectory JSONL).

    Args:
        input_path: trajectory JSONL (from simulate, optionally with rewards from evaluate).
        output_path: the HTML page to write; ``<output_path>.config.json`` records the arguments.
        title: page title (default: "Dialogues: <input file name>").
        max_dialogues: show only the first N dialogues of the file.
    """
    from sweet_rl.io import read_jsonl, write_sidecar

    if max_dialogues is not None and (isinstance(max_dialogues, bool)
                                      or not isinstance(max_dialogues, int) or max_dialogues < 0):
        raise ValueError(f"--max_dialogues must be a non-negative integer, got {max_dialogues!r}")
    if os.path.abspath(input_path) == os.path.abspath(output_path):
        raise ValueError(f"output path {output_path} is the input file; refusing to overwrite it")
    records = read_jsonl(input_path, parse=Trajectory.from_dict)  # validates, names file/line/field
    if max_dialogues is not None:
        records = records[:max_dialogues]
    dicts = [r.to_dict() for r in records]
    title = title if title is not None else f"Dialogues: {os.path.basename(input_path)}"
    page = render_dialogues_html(dicts, str(title))
    _write_atomic(output_path, page)
    write_sidecar(output_path, {"input_path": input_path, "output_path": output_path,
                                "title": title, "max_dialogues": max_dialogues},
                  "visualize_dialogue_histories")
    stats = summarize(dicts)
    mean = "n/a" if stats["mean_reward"] is None else f"{stats['mean_reward']:.3f}"
    print(f"visualized {stats['total']} dialogues ({stats['successful']} successful, "
          f"mean reward {mean}) -> {output_path}")


if __name__ == "__main__":
    from sweet_rl.cli.common import run_cli

    run_cli(main)
