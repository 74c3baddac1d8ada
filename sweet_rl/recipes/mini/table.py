"""Stage: the miniature reproduction's table (paper Table 2 shape) from its evaluation files.

    sweet-rl mini table outputs/mini_repro

Reads ``OUT/seed*/eval_<method>.jsonl`` (graded by ``evaluate_code.py``: each row's
``reward`` is its share of tests passed) and prints, per method, the mean over seeds of
*tests passed* (mean reward, %) and *success* (share of dialogues with every test passed, %),
each with its spread (sample standard deviation over seeds; the per-seed values in
``table.json``), then, for a data-scaling sweep (methods trained on the first part of the
offline tasks: ``eval_<method>_1of3.jsonl``, ...), success by the share trained on (paper
Figure 3b), then any critic Best-of-N curve (``seed*/best_of_n.json``, from
:mod:`sweet_rl.recipes.mini.best_of_n`). Writes ``OUT/table.md`` and ``OUT/table.json``.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional

from sweet_rl.flags import Options, flag

# The paper's rows, in its order; a method with no evaluation file is left out.
METHODS = (("zero_shot", "Zero-shot (warm agent)"), ("rft", "Rejection fine-tuning"),
           ("multiturn_dpo", "Multi-turn DPO"), ("sweet_no_gt", "SWEET-RL w/o training-time info"),
           ("sweet_sum", "SWEET-RL w/ sum instead of mean"), ("sweet", "SWEET-RL"))


def scores(path: str) -> Dict[str, float]:
    """Tests passed and success (both %) of one graded evaluation file."""
    from sweet_rl.io import read_jsonl

    rewards = []
    for number, row in enumerate(read_jsonl(path), start=1):
        reward = row.get("reward") if isinstance(row, dict) else None
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            raise ValueError(f"{path}:{number}: field 'reward' is missing or not a number "
                             "(grade the file with scripts/evaluate_code.py first)")
        rewards.append(float(reward))
    if not rewards:
        raise ValueError(f"{path}: no dialogues")
    return {"tests_passed": 100 * sum(rewards) / len(rewards),
            "success": 100 * sum(r >= 1.0 for r in rewards) / len(rewards),
            "dialogues": len(rewards)}


def spread(values: List[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def collect(output_dir: str) -> Dict[str, Dict[int, Dict[str, float]]]:
    """method -> seed -> scores, for every ``seed<N>/eval_<method>.jsonl`` present."""
    found: Dict[str, Dict[int, Dict[str, float]]] = {}
    for path in sorted(glob.glob(os.path.join(output_dir, "seed*", "eval_*.jsonl"))):
        seed = re.fullmatch(r"seed(\d+)", os.path.basename(os.path.dirname(path)))
        method = os.path.basename(path)[len("eval_"):-len(".jsonl")]
        if seed:
            found.setdefault(method, {})[int(seed.group(1))] = scores(path)
    return found


# a method trained on the first part of the offline tasks (the data-scaling sweep)
_PART = re.compile(r"(?P<method>\w+?)_(?P<num>\d+)of(?P<den>\d+)")


def _mean_spread(per_seed: Dict[int, Dict[str, float]], key: str) -> str:
    values = [per_seed[s][key] for s in sorted(per_seed)]
    return f"{statistics.mean(values):.1f} ± {spread(values):.1f}"


def render_sweep(found: Dict[str, Dict[int, Dict[str, float]]]) -> str:
    """Figure 3b's shape: success % by the share of the offline tasks trained on, one column
    per method with parts (``<method>_<n>of<d>``; the whole set is the method itself); empty
    without parts."""
    from fractions import Fraction

    parts: Dict[str, Dict[Fraction, str]] = {}
    for name in found:
        match = _PART.fullmatch(name)
        if match:
            share = Fraction(int(match["num"]), int(match["den"]))
            parts.setdefault(match["method"], {})[share] = name
    if not parts:
        return ""
    for method, by_share in parts.items():
        if method in found:
            by_share[Fraction(1)] = method
    labels = dict(METHODS)
    methods = [m for m, _ in METHODS if m in parts] + sorted(set(parts) - set(labels))
    shares = sorted({share for by_share in parts.values() for share in by_share})
    lines = ["| offline tasks | " + " | ".join(labels.get(m, m) for m in methods) + " |",
             "| --- |" + " --- |" * len(methods)]
    for share in shares:
        cells = [_mean_spread(found[parts[m][share]], "success") if share in parts[m] else "—"
                 for m in methods]
        lines.append(f"| {'all' if share == 1 else share} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(found: Dict[str, Dict[int, Dict[str, float]]], seconds: Optional[float] = None) -> str:
    names = dict(METHODS)
    whole = [m for m in found if not _PART.fullmatch(m)]
    order = [m for m, _ in METHODS if m in whole] + sorted(set(whole) - set(names))
    lines = ["| method | tests passed % | success % | seeds |", "| --- | --- | --- | --- |"]
    for method in order:
        per_seed = found[method]
        cells = [_mean_spread(per_seed, key) for key in ("tests_passed", "success")]
        lines.append(f"| {names.get(method, method)} | {cells[0]} | {cells[1]} | "
                     f"{len(per_seed)} |")
    sweep = render_sweep(found)
    if sweep:
        lines.append("\nSuccess % by the share of the offline tasks trained on (mean ± spread "
                     "over seeds)\n" + sweep)
    if seconds is not None:
        lines.append(f"\nwhole run: {seconds / 60:.1f} min")
    return "\n".join(lines)


@dataclass(kw_only=True)
class TableOptions(Options):
    """Print and write the table of the evaluations under OUTPUT_DIR."""

    POSITIONAL = ("output_dir", "seconds")
    output_dir: str = flag(
        "a miniature run's folder (``seed*/eval_*.jsonl`` under it); the table is written "
        "there as ``table.md`` and ``table.json``.")
    seconds: Optional[float] = flag("the run's wall time, printed under the table.", None)


def table(opts: TableOptions) -> str:
    """The table (methods, then any Best-of-N curve), written and printed."""
    found = collect(opts.output_dir)
    if not found:
        raise ValueError(f"{opts.output_dir}: no seed*/eval_*.jsonl files")
    text = render(found, opts.seconds)
    for path in sorted(glob.glob(os.path.join(opts.output_dir, "seed*", "best_of_n.json"))):
        from sweet_rl.recipes.mini.best_of_n import render as render_curve

        with open(path) as handle:
            curve = json.load(handle)
        success = {name: {int(n): v for n, v in by_n.items()}
                   for name, by_n in curve["success"].items()}
        seed = os.path.basename(os.path.dirname(path))
        text += (f"\n\nBest-of-N success % ({seed}; the chooser picks among N replies "
                 f"sampled at every turn)\n" + render_curve(success, curve["ns"]))
    with open(os.path.join(opts.output_dir, "table.md"), "w") as handle:
        handle.write(text + "\n")
    with open(os.path.join(opts.output_dir, "table.json"), "w") as handle:
        json.dump({"seconds": opts.seconds, "methods": found}, handle, indent=1)
    print(text)
    return text


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(table, TableOptions, argv)


if __name__ == "__main__":
    main()
