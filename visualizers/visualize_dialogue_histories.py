#!/usr/bin/env python
"""Render a trajectory JSONL as one static, self-contained HTML page for reading dialogues.

    python visualizers/visualize_dialogue_histories.py outputs/eval.jsonl outputs/eval.html \
        [--title "My run"] [--max_dialogues 50]
    python visualizers/visualize_dialogue_histories.py outputs/eval.jsonl   # -> outputs/eval.html

The page has a counts summary, a sidebar with one link per dialogue, an inline-JS filter
(all / successful / failed / not evaluated) and, per dialogue, its index (0-based position in
the file), which task and rollout it is (``task i, rollout j of k``, counted from 1: k comes
from the file's sidecar, see :func:`rollouts_of`), the problem description, the turns
(assistant prompt and raw output folded away in ``<details>``), the final answer, the hidden
reference solution, the reward and a badge. A graded row that kept its ``test_results``
(evaluate_code) shows how many tests passed and a table of the failed ones: the test, what
the reference gave, what the answer gave (or its error, timeout…), and the grader's verdict.
Replies of the simulated human that leak the reference (the row's ``leak_turns``, written by
the backend environment, see :mod:`sweet_rl.environments.leaks`) are framed in red and tagged, and
the header gives the file's leak rate; rows without leak information show neither.
Everything taken from the file is HTML-escaped; no user text ever reaches a script or attribute
unescaped. CSS and JS are inline: the page needs no server and loads nothing from the network.
A frontend (design) file is refused with a line naming the design viewer
(:func:`visualizers.page_parts.file_kind` says how the two are told apart).
"""

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

# Run as a script, the repository root is not on the path: add it for sweet_rl (in a plain
# checkout) and for the shared page parts.
if importlib.util.find_spec("sweet_rl") is None or importlib.util.find_spec("visualizers") is None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.io import write_bytes  # noqa: E402
from sweet_rl.layout import check_rollout_layout, place  # noqa: E402
from sweet_rl.environments.leaks import format_leak_rate, leak_summary  # noqa: E402
from sweet_rl.records import Trajectory  # noqa: E402
from visualizers.page_parts import (  # noqa: E402
    BACKEND, PageOptions, esc as _esc, filter_buttons, folded, nav_item, page_document,
    refuse_other_kind, step_links, viewer_output)

SUCCESS, FAILED, UNEVALUATED = "success", "failed", "unevaluated"
_BADGE = {SUCCESS: "success", FAILED: "fail", UNEVALUATED: "not evaluated"}
LEAK_TAG = "leaks the reference"
_CSS = """
.turn.leak{border:2px solid #cf222e}
.leak-tag{display:inline-block;margin-left:8px;padding:0 7px;border-radius:9px;background:#cf222e;
color:#fff;font-size:11px;font-weight:700;text-transform:none}
.leak-count{color:#cf222e;font-weight:600}
.place{color:#57606a;font-weight:600}
table.failed-tests{border-collapse:collapse;width:100%;font-size:12.5px}
.failed-tests th,.failed-tests td{border:1px solid #d0d7de;padding:4px 6px;text-align:left;
vertical-align:top}.failed-tests th{background:#f6f8fa}
.failed-tests pre{padding:0;border:0;background:none}
"""


class Rollouts(NamedTuple):
    """How a file's rows split into tasks and rollouts, and where that came from."""

    k: int  # rollouts per task
    num_tasks: int
    note: str  # for the page's header

    def label(self, row: int) -> Tuple[str, str]:
        """``("task i, rollout j of k", hover text)``, counted from 1 for reading; row
        ``i + j * num_tasks`` (0-based) holds rollout j of task i (:mod:`sweet_rl.layout`)."""
        task, rollout = place(row, self.num_tasks)
        return (f"task {task + 1}, rollout {rollout + 1} of {self.k}",
                f"row {row} = task index {task} + rollout index {rollout} x {self.num_tasks} "
                "tasks (0-based)")


def rollouts_of(path: str, trajectories: List[Trajectory]) -> Rollouts:
    """k from the file's sidecar ``<path>.config.json``: the largest of evaluate_code's
    ``k``/``best_of_n`` and simulate's ``best_of_n`` that fits the file (every rollout holds
    the tasks of the first, in order); k = 1 without a sidecar or a k that fits, and the
    note says so. The whole file is read for this, even when fewer rows are shown."""
    rows, sidecar = len(trajectories), path + ".config.json"
    try:
        with open(sidecar, encoding="utf-8") as handle:
            stages = json.load(handle).get("stages")
    except FileNotFoundError:
        return Rollouts(1, rows, f"1 rollout per task assumed: no sidecar {sidecar}")
    except (OSError, ValueError, AttributeError):
        stages = None
    stages = stages if isinstance(stages, dict) else {}
    found = []
    for stage, key in (("evaluate_code", "k"), ("evaluate_code", "best_of_n"),
                       ("simulate", "best_of_n")):
        value = stages.get(stage, {}).get(key) if isinstance(stages.get(stage), dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            try:
                check_rollout_layout(path, trajectories, value)
            except ValueError:  # RecordError is one: the rows do not split into k rollouts
                continue
            found.append((value, f"{stage} --{key}"))
    if not found:
        return Rollouts(1, rows, f"1 rollout per task assumed: {sidecar} names no k that fits "
                                 "the file")
    k, source = max(found, key=lambda pair: pair[0])  # on a tie, the first: evaluate_code
    return Rollouts(k, rows // k, f"{k} rollout{'s' if k > 1 else ''} per task, {rows // k} "
                                  f"tasks ({source} in the sidecar)")


def _test_results(traj: Trajectory) -> List[Tuple[int, Dict[str, Any]]]:
    """``(position, entry)`` of the row's ``test_results`` entries that are objects (nothing
    when the key is absent or odd); positions stay those of the list, as in ``grader_tests``."""
    value = traj.extra.get("test_results")
    if not isinstance(value, list):
        return []
    return [(n, r) for n, r in enumerate(value) if isinstance(r, dict)]


def _tests_html(traj: Trajectory) -> str:
    """How many tests passed, and a table of the failed ones with expected vs got."""
    results = _test_results(traj)
    if not results:
        return ""
    verdicts = traj.extra.get("grader_tests")
    verdicts = verdicts if isinstance(verdicts, list) else []
    failed = [(n, r) for n, r in results if r.get("passed") is not True]
    head = (f'<h3 class="tests">Tests: {len(results) - len(failed)} of {len(results)} '
            f"passed</h3>")
    if not failed:
        return head
    rows = "".join(
        f"<tr><td>{n + 1}</td><td><pre>{_esc(r.get('test'))}</pre></td>"
        f"<td><pre>{_esc(r.get('expected'))}</pre></td><td><pre>{_esc(r.get('got'))}</pre></td>"
        f"<td>{_esc(verdicts[n] if n < len(verdicts) else '')}</td></tr>" for n, r in failed)
    return (f'{head}<table class="failed-tests"><thead><tr><th>#</th><th>test</th>'
            "<th>expected (reference)</th><th>got (answer)</th><th>verdict</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


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


def _dialogue_html(index: int, total: int, traj: Trajectory, error: Any,
                   rollouts: Rollouts) -> str:
    status = _status(traj.reward)
    reward_text = "not evaluated" if traj.reward is None else f"{traj.reward:.3f}"
    leaking = set(_leak_turns(traj))
    turns = ("".join(_turn_html(t, i in leaking) for i, t in enumerate(traj.dialogue_history))
             or '<p class="empty">(no turns)</p>')
    shown = len(leaking & set(range(len(traj.dialogue_history))))
    leak_note = (f'<span class="leak-count">{shown} leaking '
                 f'{"reply" if shown == 1 else "replies"}</span>' if shown else "")
    error_html = f'<p class="error">error: {_esc(error)}</p>' if error is not None else ""
    place, place_hint = rollouts.label(index)
    return (
        f'<section class="dialogue" id="dialogue-{index}" data-status="{status}">'
        f'<div class="head"><h2>Dialogue #{index}</h2>'
        f'<span class="place" title="{place_hint}">{place}</span>'
        f'<span class="badge {status}">{_BADGE[status]}</span>'
        f'<span class="reward">reward: {reward_text}</span>{leak_note}'
        f"{step_links(index, total)}</div>{error_html}{_tests_html(traj)}"
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


def render_dialogues_html(trajectories: List[Dict[str, Any]], title: str,
                          rollouts: Optional[Rollouts] = None) -> str:
    """Return the whole page for ``trajectories`` (trajectory dicts as stored in the JSONL);
    ``rollouts`` says how the file's rows split into tasks (default: one rollout each)."""
    parsed = [Trajectory.from_dict(d) for d in trajectories]
    if rollouts is None:
        rollouts = Rollouts(1, len(parsed), "1 rollout per task assumed: no sidecar read")
    stats = summarize(trajectories)
    mean = "n/a" if stats["mean_reward"] is None else f"{stats['mean_reward']:.3f}"
    nav_items, sections = [], []
    for i, traj in enumerate(parsed):
        nav_items.append(nav_item(i, _status(traj.reward), traj.task.problem_description))
        sections.append(_dialogue_html(i, len(parsed), traj, traj.extra.get("error"), rollouts))
    body = "".join(sections) or '<p class="empty">No dialogues in this file.</p>'
    filters = filter_buttons(((SUCCESS, "successful"), (FAILED, "failed"),
                              (UNEVALUATED, "not evaluated")))
    summary = (f'<span><b id="count-total">{stats["total"]}</b> dialogues</span>'
               f'<span><b id="count-successful">{stats["successful"]}</b> successful</span>'
               f'<span><b id="count-failed">{stats["failed"]}</b> failed</span>'
               f'<span><b id="count-unevaluated">{stats["unevaluated"]}</b> not evaluated</span>'
               f'<span>mean reward <b id="mean-reward">{mean}</b></span>'
               f'<span>showing <b id="shown-count">{stats["total"]}</b></span>'
               f'<span id="rollouts">{_esc(rollouts.note)}</span>')
    leaks = leak_summary(trajectories)
    if leaks["dialogues"]:  # some row was checked for leaks (backend runs)
        summary += f'<span id="leak-rate">{_esc(format_leak_rate(leaks))}</span>'
    return page_document(title, summary, filters, nav_items, body, extra_css=_CSS)


@dataclass(kw_only=True)
class ViewerOptions(PageOptions):
    """Write OUTPUT_PATH (HTML) showing the dialogues of INPUT_PATH (trajectory JSONL).

    The original code served the dialogues with a gradio app; this writes one static page.
    """


def visualize(opts: ViewerOptions) -> str:
    """Write the page and its sidecar, print one line; returns the page's path."""
    from sweet_rl.io import read_jsonl, write_sidecar

    input_path = opts.input_path
    output_path = viewer_output(input_path, opts.output_path)
    if os.path.abspath(input_path) == os.path.abspath(output_path):
        raise ValueError(f"output path {output_path} is the input file; refusing to overwrite it")
    records = read_jsonl(input_path, parse=Trajectory.from_dict)  # validates, names file/line/field
    refuse_other_kind(input_path, records, BACKEND)
    rollouts = rollouts_of(input_path, records)  # from every row, before any are cut off
    if opts.max_dialogues is not None:
        records = records[:opts.max_dialogues]
    dicts = [r.to_dict() for r in records]
    title = opts.title if opts.title is not None else f"Dialogues: {os.path.basename(input_path)}"
    page = render_dialogues_html(dicts, title, rollouts)
    write_bytes(output_path, page.encode("utf-8"))
    write_sidecar(output_path, {"input_path": input_path, "output_path": output_path,
                                "title": title, "max_dialogues": opts.max_dialogues},
                  "visualize_dialogue_histories")
    stats = summarize(dicts)
    mean = "n/a" if stats["mean_reward"] is None else f"{stats['mean_reward']:.3f}"
    print(f"visualized {stats['total']} dialogues ({stats['successful']} successful, "
          f"mean reward {mean}) -> {output_path}")
    return output_path


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(visualize, ViewerOptions, argv)


if __name__ == "__main__":
    main()
