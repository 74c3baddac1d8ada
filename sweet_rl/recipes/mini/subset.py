"""Stage: the first part of an offline set, for the miniature's data-scaling sweep (paper
Figure 3b).

    sweet-rl mini subset seed0/offline.jsonl --output_path seed0/offline_1of3.jsonl \\
        --k 3 --fraction 1/3
    sweet-rl mini subset seed0/offline.jsonl --k 3 --fraction 1/3 \\
        --sampled seed0/sampled.jsonl --sampled_output seed0/sampled_1of3.jsonl

Keeps the first ``fraction`` of the tasks (``round(tasks x fraction)``, at least one) with all
``k`` of their dialogues, in simulate's layout, so every method trained on the part sees the
same dialogues, and a larger part holds every smaller one. With ``--sampled`` (the candidates
``sample_best_of_n`` drew for the whole set, which covers its first rows) it also keeps the
step records of the kept dialogues, so the part's SWEET-RL ranks the very candidates the whole
set's did instead of drawing new ones: the records follow the sampled rows' assistant turns in
order, and each is checked against its turn's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from sweet_rl.flags import Options, flag


def parse_fraction(text) -> Fraction:
    """``1/3``, ``0.5`` or ``1``: a share in (0, 1]."""
    try:
        value = Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--fraction must be a share such as 1/3 or 0.5, got {text!r}") from None
    if not 0 < value <= 1:
        raise ValueError(f"--fraction must be in (0, 1], got {text!r}")
    return value


def tag(fraction) -> str:
    """The name of a part in file names: ``1/3`` -> ``1of3`` (``eval_sweet_1of3.jsonl``)."""
    value = parse_fraction(fraction)
    return f"{value.numerator}of{value.denominator}"


@dataclass(kw_only=True)
class SubsetOptions(Options):
    """Write the first FRACTION of the tasks of OFFLINE (and of their sampled candidates)."""

    POSITIONAL = ("offline",)
    offline: str = flag("offline dialogues in simulate's layout (graded or not).")
    output_path: Optional[str] = flag(
        "where the part goes (same layout, fewer tasks); optional with --sampled.", None)
    k: int = flag("dialogues per task in OFFLINE.", 3)
    fraction: str = flag("the share of the tasks kept (1/3, 0.5, ...).", "1")
    sampled: Optional[str] = flag(
        "step records with candidates (sample_best_of_n's output) for the first rows of "
        "OFFLINE.", None)
    sampled_output: Optional[str] = flag("where the kept step records go (with --sampled).",
                                         None)

    def check(self) -> None:
        parse_fraction(self.fraction)
        if self.k < 1:
            raise ValueError(f"--k must be at least 1, got {self.k}")
        if bool(self.sampled) != bool(self.sampled_output):
            raise ValueError("--sampled and --sampled_output go together")
        if not (self.output_path or self.sampled_output):
            raise ValueError("give --output_path, or --sampled and --sampled_output")


def subset(opts: SubsetOptions) -> int:
    """Write the part(s); returns how many tasks were kept."""
    from sweet_rl.io import read_jsonl, write_jsonl, write_sidecar
    from sweet_rl.layout import place

    offline, k = opts.offline, opts.k
    rows = list(read_jsonl(offline))
    if not rows or len(rows) % k:
        raise ValueError(f"{offline}: {len(rows)} rows are not a whole number of --k {k} "
                         "dialogues per task")
    tasks = len(rows) // k
    kept = max(1, round(tasks * parse_fraction(opts.fraction)))
    part = [row for r, row in enumerate(rows) if place(r, tasks)[0] < kept]
    message = f"mini_subset: {kept} of {tasks} tasks ({len(part)} dialogues)"
    chosen = []
    if opts.sampled:  # read and checked in full before anything is written
        records, at = list(read_jsonl(opts.sampled)), 0
        for r, row in enumerate(rows):
            for turn in row.get("dialogue_history", []):
                if turn.get("role") != "assistant" or at == len(records):
                    continue
                if records[at].get("older_output") != turn.get("output"):
                    raise ValueError(f"{opts.sampled}:{at + 1}: field 'older_output' is not "
                                     f"the output of the matching turn of {offline} row "
                                     f"{r + 1} (sample the candidates from this offline file)")
                if place(r, tasks)[0] < kept:
                    chosen.append(records[at])
                at += 1
    if opts.output_path:
        write_jsonl(opts.output_path, part)
        write_sidecar(opts.output_path, opts.flags(), "mini_subset")
        message += f" -> {opts.output_path}"
    if opts.sampled:
        write_jsonl(opts.sampled_output, chosen)
        write_sidecar(opts.sampled_output, opts.flags(), "mini_subset")
        message += f"; {len(chosen)} of {len(records)} step records -> {opts.sampled_output}"
    print(message)
    return kept


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(subset, SubsetOptions, argv)


if __name__ == "__main__":
    main()
