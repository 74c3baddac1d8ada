#!/usr/bin/env python
"""Render a trajectory JSONL as one static, self-contained HTML page for reading dialogues.

    python visualizers/visualize_dialogue_histories.py outputs/eval.jsonl outputs/eval.html \
        [--title "My run"] [--max_dialogues 50]
    python visualizers/visualize_dialogue_histories.py outputs/eval.jsonl   # -> outputs/eval.html

The page has a counts summary, a sidebar with one link per dialogue, an inline-JS filter
(all / successful / failed / not evaluated) and, per dialogue, its index (0-based position in
the file), the problem description, the turns (assistant prompt and raw output folded away in
``<details>``), the final answer, the hidden reference solution, the reward and a badge.
Replies of the simulated human that leak the reference (the row's ``leak_turns``, written by
the backend environment, see :mod:`sweet_rl.leaks`) are framed in red and tagged, and the
header gives the file's leak rate; rows without leak information show neither.
Everything taken from the file is HTML-escaped; no user text ever reaches a script or attribute
unescaped. CSS and JS are inline: the page needs no server and loads nothing from the network.
"""

import importlib.util
import os
import sys
from typing import Any, Dict, List, Optional

# Run as a script, the repository root is not on the path: add it for sweet_rl (in a plain
# checkout) and for the shared page parts.
if importlib.util.find_spec("sweet_rl") is None or importlib.util.find_spec("visualizers") is None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.io import write_bytes  # noqa: E402
from sweet_rl.leaks import format_leak_rate, leak_summary  # noqa: E402
from sweet_rl.records import Trajectory  # noqa: E402
from visualizers.page_parts import (  # noqa: E402
    esc as _esc, filter_buttons, folded, nav_item, page_document, step_links, viewer_paths)

SUCCESS, FAILED, UNEVALUATED = "success", "failed", "unevaluated"
_BADGE = {SUCCESS: "success", FAILED: "fail", UNEVALUATED: "not evaluated"}
LEAK_TAG = "leaks the reference"
_CSS = """
.turn.leak{border:2px solid #cf222e}
.leak-tag{display:inline-block;margin-left:8px;padding:0 7px;border-radius:9px;background:#cf222e;
color:#fff;font-size:11px;font-weight:700;text-transform:none}
.leak-count{color:#cf222e;font-weight:600}
"""


def _status(reward: Optional[float]) -> str:
    if reward is None:
        return UNEVALUATED
    return SUCCESS if abs(reward - 1.0) < 1e-9 else FAILED


def _leak_turns(traj: Trajectory) -> List[int]:
    """The history indices the row marks as leaking (nothing when the key is absent or odd)."""
    value = traj.extra.get("leak_turns")
    if not isinstance(value, list):
        return []
    return [i for i in value if isinstance(i, int) and not isinstance(i, bool)]


def _turn_html(turn, leaks: bool = False) -> str:
    role = turn.role if turn.role in ("user", "assistant") else "other"
    css = f"turn {role} leak" if leaks else f"turn {role}"
    tag = f'<span class="leak-tag">{LEAK_TAG}</span>' if leaks else ""
    parts = [f'<div class="{css}"><div class="role">{_esc(turn.role)}{tag}</div>',
             f'<div class="text">{_esc(turn.content)}</div>']
    if turn.input is not None:
        parts.append(folded("prompt the agent saw", turn.input))
    if turn.output is not None:
        parts.append(folded("raw model output", turn.output))
    parts.append("</div>")
    return "".join(parts)


def _dialogue_html(index: int, total: int, traj: Trajectory, error: Any) -> str:
    status = _status(traj.reward)
    reward_text = "not evaluated" if traj.reward is None else f"{traj.reward:.3f}"
    leaking = set(_leak_turns(traj))
    turns = ("".join(_turn_html(t, i in leaking) for i, t in enumerate(traj.dialogue_history))
             or '<p class="empty">(no turns)</p>')
    shown = len(leaking & set(range(len(traj.dialogue_history))))
    leak_note = (f'<span class="leak-count">{shown} leaking '
                 f'{"reply" if shown == 1 else "replies"}</span>' if shown else "")
    error_html = f'<p class="error">error: {_esc(error)}</p>' if error is not None else ""
    return (
        f'<section class="dialogue" id="dialogue-{index}" data-status="{status}">'
        f'<div class="head"><h2>Dialogue #{index}</h2>'
        f'<span class="badge {status}">{_BADGE[status]}</span>'
        f'<span class="reward">reward: {reward_text}</span>{leak_note}'
        f"{step_links(index, total)}</div>{error_html}"
        f'<h3>Problem description</h3><div class="text">{_esc(traj.task.problem_description)}</div>'
        f"<h3>Dialogue ({len(traj.dialogue_history)} turns)</h3>{turns}"
        f'<h3>Final answer</h3><pre class="answer">{_esc(traj.answer) or "(no answer)"}</pre>'
        "<h3>Hidden reference (ground truth)</h3>"
        f'<pre class="reference">{_esc(traj.task.ground_truth)}</pre>'
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
        nav_items.append(nav_item(i, _status(traj.reward), traj.task.problem_description))
        sections.append(_dialogue_html(i, len(parsed), traj, traj.extra.get("error")))
    body = "".join(sections) or '<p class="empty">No dialogues in this file.</p>'
    filters = filter_buttons(((SUCCESS, "successful"), (FAILED, "failed"),
                              (UNEVALUATED, "not evaluated")))
    summary = (f'<span><b id="count-total">{stats["total"]}</b> dialogues</span>'
               f'<span><b id="count-successful">{stats["successful"]}</b> successful</span>'
               f'<span><b id="count-failed">{stats["failed"]}</b> failed</span>'
               f'<span><b id="count-unevaluated">{stats["unevaluated"]}</b> not evaluated</span>'
               f'<span>mean reward <b id="mean-reward">{mean}</b></span>'
               f'<span>showing <b id="shown-count">{stats["total"]}</b></span>')
    leaks = leak_summary(trajectories)
    if leaks["dialogues"]:  # some row was checked for leaks (backend runs)
        summary += f'<span id="leak-rate">{_esc(format_leak_rate(leaks))}</span>'
    return page_document(title, summary, filters, nav_items, body, extra_css=_CSS)


def main(input_path: Optional[str] = None, output_path: Optional[str] = None,
         title: Optional[str] = None, max_dialogues: Optional[int] = None,
         saved_path: Optional[str] = None) -> None:
    """Write OUTPUT_PATH (HTML) showing the dialogues of INPUT_PATH (trajectory JSONL).

    The original code served the dialogues with a gradio app; this writes one static page.

    Args:
        input_path: trajectory JSONL (from simulate, optionally with rewards from evaluate).
        output_path: the HTML page to write (default: INPUT_PATH with .html instead of
            .jsonl); ``<output_path>.config.json`` records the arguments.
        title: page title (default: "Dialogues: <input file name>").
        max_dialogues: show only the first N dialogues of the file.
        saved_path: the original code's name for input_path.
    """
    from sweet_rl.io import read_jsonl, write_sidecar

    input_path, output_path = viewer_paths(input_path, output_path, saved_path)

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
    write_bytes(output_path, page.encode("utf-8"))
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
