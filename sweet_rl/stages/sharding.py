"""Splitting a stage's rows over several nodes, and joining the pieces back (pure logic).

A sharded stage (``--num_shards N --shard_index I``) processes one contiguous block of the
rows a single run would process and writes them, in the same order, to its own file. Blocks
are contiguous so that concatenating the shard files in index order gives the single run's
file line for line; every draw a row makes depends on its global index, never on its place in
the shard, so the rows themselves are the same too.

Each shard records :func:`shard_facts` in its sidecar. :func:`merge_shards` trusts nothing
else: it checks from the sidecars and the files that the shards are the complete, matching
pieces of one run before it writes anything, and writes the sidecar that run would have.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import Any, Dict, List, Sequence, Tuple

from sweet_rl.io import atomic_file, write_json
from sweet_rl.records import RecordError

logger = logging.getLogger(__name__)

FACT_KEYS = ("num_shards", "shard_index", "shard_rows")
BLOCK_KEY = "shard_block"  # recorded only by stages that deal rows in runs (shard_bounds)
# arguments naming the file itself: each shard names its own, the merged file is the output
OUTPUT_KEYS = ("output_path", "saved_path")
# how a file was written, not what it holds: a shard resumed after a crash still matches
RUN_CONTROL_KEYS = ("to_continue", "overwrite")


def check_shard_flags(num_shards: int, shard_index: int) -> None:
    """Refuse impossible flags early, before a stage reads its input."""
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"--num_shards must be an integer of at least 1, got {num_shards!r}")
    if isinstance(shard_index, bool) or not isinstance(shard_index, int) \
            or not 0 <= shard_index < num_shards:
        raise ValueError(f"--shard_index must be an integer in [0, --num_shards) = "
                         f"[0, {num_shards}), got {shard_index!r}")


def shard_bounds(total: int, num_shards: int, shard_index: int,
                 block: int = 1) -> Tuple[int, int]:
    """Rows ``[lo, hi)`` of shard ``shard_index``: blocks differ by at most one row and the
    earlier shards take the extra rows, so the blocks tile ``range(total)`` in order.

    ``block`` > 1: the rows are dealt in runs of ``block`` (the last run may be shorter), so
    every shard starts at a multiple of ``block``. A stage that works in chunks of ``block``
    rows then forms, on each shard, the very chunks a single run forms: batch mates, and so
    the last bits of a batched forward pass, are the same (see sample_best_of_n).
    """
    check_shard_flags(num_shards, shard_index)
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f"the row count must be a non-negative integer, got {total!r}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"the shard block must be an integer of at least 1, got {block!r}")
    runs = -(-total // block)  # ceil
    base, extra = divmod(runs, num_shards)
    lo = shard_index * base + min(shard_index, extra)
    hi = lo + base + (1 if shard_index < extra else 0)
    return min(lo * block, total), min(hi * block, total)


def shard_facts(total: int, num_shards: int, shard_index: int,
                block: int = 1) -> Dict[str, Any]:
    """What a sharded stage records among its sidecar arguments (an unsharded run too, as
    shard 0 of 1, so that its sidecar and a merged one state the same facts); ``shard_block``
    only where the rows are dealt in runs (``block`` > 1)."""
    lo, hi = shard_bounds(total, num_shards, shard_index, block)
    facts: Dict[str, Any] = {"num_shards": num_shards, "shard_index": shard_index,
                             "shard_rows": [lo, hi, total]}
    if block != 1:
        facts["shard_block"] = block
    return facts


def _read_sidecar(path: str) -> Dict[str, Any]:
    sidecar = path + ".config.json"
    if not os.path.exists(path):
        raise RecordError("file not found", path=path)
    if not os.path.exists(sidecar):
        raise RecordError("missing: every shard needs the sidecar its stage wrote (were the "
                          "shard files copied without their .config.json?)", path=sidecar)
    try:
        with open(sidecar, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise RecordError(f"unreadable ({err})", path=sidecar) from None
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict) or not all(isinstance(a, dict) for a in stages.values()):
        raise RecordError("missing or not a mapping of stage -> arguments", field="stages",
                          path=sidecar)
    return data


def _line_count(path: str) -> int:
    """Complete non-blank lines; a torn last line (a writer killed mid-record) is refused,
    and the shard is only read here, never repaired."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        for line in handle:
            count += bool(line.strip())
            last = line[-1:]
    if last != b"\n":
        raise RecordError("ends in a torn line: incomplete shard (resume its run with "
                          "--to_continue, then merge)", path=path)
    return count


def _facts_of(path: str, stage: str, arguments: Dict[str, Any]) -> Tuple[int, int, List[int]]:
    where = dict(path=path + ".config.json")
    for key in FACT_KEYS:
        if key not in arguments:
            raise RecordError("missing: not a shard of a sharded stage",
                              field=f"stages.{stage}.{key}", **where)
    count, index, rows = (arguments[k] for k in FACT_KEYS)
    block = arguments.get(BLOCK_KEY, 1)  # absent: one row at a time (and in older sidecars)
    if not (isinstance(rows, list) and len(rows) == 3 and all(isinstance(r, int) for r in rows)):
        raise RecordError(f"expected [lo, hi, total], got {rows!r}",
                          field=f"stages.{stage}.shard_rows", **where)
    try:
        expected = [*shard_bounds(rows[2], count, index, block), rows[2]]
    except ValueError as err:
        field = BLOCK_KEY if "block" in str(err) else "num_shards"
        raise RecordError(str(err), field=f"stages.{stage}.{field}", **where) from None
    if rows != expected:
        raise RecordError(f"{rows!r} is not block {index} of {count} (expected {expected!r})",
                          field=f"stages.{stage}.shard_rows", **where)
    return count, index, rows


def _check_same(field: str, values: List[Any], paths: List[str]) -> None:
    """Refuse, naming the sidecar, the field and both values, where a shard differs."""
    for path, value in zip(paths[1:], values[1:]):
        if value != values[0]:
            raise RecordError(f"{value!r} here but {values[0]!r} in {paths[0]}.config.json: "
                              "the shards were not made by the same command",
                              field=field, path=path + ".config.json")


def merge_shards(shard_paths: Sequence[str], output_path: str,
                 overwrite: bool = False) -> Dict[str, Any]:
    """Join shard files into the file one unsharded run would have written, with its sidecar.

    Everything is checked before anything is written; the rows are copied byte for byte in
    shard-index order (the order given does not matter) into a temporary file that replaces
    ``output_path`` only when complete. Returns ``{"shards", "rows", "output_path"}``.
    """
    paths = [str(p) for p in shard_paths]
    if not paths:
        raise ValueError("give at least one shard file to merge")
    if os.path.abspath(output_path) in {os.path.abspath(p) for p in paths}:
        raise ValueError(f"--output_path {output_path} is one of the shards; merge into a new "
                         "file")
    if os.path.exists(output_path) and not overwrite:
        raise FileExistsError(f"{output_path} exists: pass --overwrite to replace it")
    sidecars = [_read_sidecar(p) for p in paths]
    _check_same("sweet_rl_version", [s.get("sweet_rl_version") for s in sidecars], paths)

    # the stages that cut the rows (those recording shard facts) must be the same everywhere
    made = [[n for n, a in s["stages"].items() if any(k in a for k in FACT_KEYS)]
            for s in sidecars]
    for path, stages in zip(paths[1:], made[1:]):
        if sorted(stages) != sorted(made[0]):
            raise RecordError(f"made by stage(s) {made[0]} but {path} by {stages}: the shards "
                              "were made by different stages", field="stages",
                              path=paths[0] + ".config.json")
    if not made[0]:
        raise RecordError("no stage recorded --num_shards/--shard_index: not shard files",
                          field="stages", path=paths[0] + ".config.json")
    sharded = made[0]
    names = [list(s["stages"]) for s in sidecars]
    common = [n for n in names[0] if all(n in other for other in names[1:])]
    dropped = sorted({n for stage_names in names for n in stage_names} - set(common))
    if dropped:  # e.g. one shard was also evaluated: that stage is not the whole file's
        logger.warning("stages %s are not recorded by every shard: left out of the merged "
                       "sidecar", ", ".join(dropped))
    facts = [_facts_of(p, sharded[0], s["stages"][sharded[0]]) for p, s in zip(paths, sidecars)]
    for stage in sharded[1:]:  # two sharded stages on one file must cut it the same way
        for path, sidecar, own in zip(paths, sidecars, facts):
            if _facts_of(path, stage, sidecar["stages"][stage]) != own:
                raise RecordError(f"shard facts differ from those of stage {sharded[0]}",
                                  field=f"stages.{stage}.shard_rows", path=path + ".config.json")
    _check_same(f"stages.{sharded[0]}.num_shards", [f[0] for f in facts], paths)
    _check_same(f"stages.{sharded[0]}.shard_rows[2] (total rows)", [f[2][2] for f in facts],
                paths)
    count, total = facts[0][0], facts[0][2][2]
    by_index: Dict[int, str] = {}
    for path, (_, index, _) in zip(paths, facts):
        if index in by_index:
            raise RecordError(f"shard {index} given twice: {by_index[index]} and {path}",
                              field=f"stages.{sharded[0]}.shard_index",
                              path=path + ".config.json")
        by_index[index] = path
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        raise ValueError(f"shard(s) {missing} of {count} missing (given: {', '.join(paths)}): "
                         f"give every shard file (--shard_index 0..{count - 1})")

    for stage in common:
        keys = set().union(*(s["stages"][stage] for s in sidecars))
        for key in sorted(keys - set(FACT_KEYS) - set(OUTPUT_KEYS) - set(RUN_CONTROL_KEYS)):
            _check_same(f"stages.{stage}.{key}", [s["stages"][stage].get(key, "<not recorded>")
                                                  for s in sidecars], paths)
    for path, (_, index, rows) in zip(paths, facts):
        lines = _line_count(path)
        if lines != rows[1] - rows[0]:
            raise RecordError(f"holds {lines} rows but shard {index} of {count} covers rows "
                              f"{rows[0]}..{rows[1]} ({rows[1] - rows[0]} rows): "
                              + ("incomplete shard (resume its run with --to_continue, then "
                                 "merge)" if lines < rows[1] - rows[0] else
                                 "more rows than its sidecar records"), path=path)

    ordered = [by_index[i] for i in range(count)]
    with atomic_file(output_path, ".jsonl") as out:
        for path in ordered:
            with open(path, "rb") as handle:
                shutil.copyfileobj(handle, out)
    merged: Dict[str, Any] = {}
    for stage in common:
        arguments = dict(sidecars[0]["stages"][stage])
        for key in OUTPUT_KEYS:
            if key in arguments:
                arguments[key] = output_path
        for key in RUN_CONTROL_KEYS:
            values = [s["stages"][stage].get(key) for s in sidecars]
            if key in arguments and any(v != values[0] for v in values):
                arguments[key] = any(values)  # true when any shard's run was resumed/replaced
        if stage in sharded:
            arguments.update(shard_facts(total, 1, 0, arguments.get(BLOCK_KEY, 1)))
        merged[stage] = arguments
    sidecar = {key: value for key, value in sidecars[0].items() if key != "stages"}
    sidecar.update(stages=merged, merged_from=ordered)
    write_json(output_path + ".config.json", sidecar)
    return {"shards": count, "rows": total, "output_path": output_path}
