"""Stage: build the frontend train/test task files from WebSight v0.2.

One streaming pass over the source routes row ``i`` to ``train.jsonl`` when
``train_start <= i < train_end`` and to ``test.jsonl`` when ``test_start <= i < test_end``
(ColBench: rows 0-9,999 and 10,000-19,999), one task per row, in row order.

Resuming: tasks are appended in chunks, each line in one write, so a killed run leaves
complete lines (a torn last line is cut). Re-running the same command continues after the
lines already there: every row is streamed again from the first range start, the rows already
written are checked against what they would be now (a file made from other rows or another
source stops the run with the file and line), and only the missing rows are appended. Nothing
is ever duplicated. ``--overwrite`` starts both files afresh. A run whose files are complete
and whose sidecar records the same source and ranges returns at once.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from sweet_rl.flags import Options, flag

SPLITS = ("train", "test")
SOURCE_KEYS = ("dataset", "config", "split", "data_files", "train_start", "train_end",
               "test_start", "test_end")


@dataclass(kw_only=True)
class PrepareFrontendOptions(Options):
    """Write OUTPUT_DIR/train.jsonl and OUTPUT_DIR/test.jsonl (frontend tasks) from WebSight.

    Example (streams about 20,000 rows of the text columns from the Hugging Face hub):
        python scripts/prepare_frontend_tasks.py data/frontend_tasks

    From local files of the same shape (parquet, JSON Lines or CSV with the columns
    ``llm_generated_idea`` and ``text``):
        python scripts/prepare_frontend_tasks.py out --data_files 'websight/*.parquet' \\
            --train_end 100 --test_start 100 --test_end 200
    """

    POSITIONAL = ("output_dir",)
    output_dir: str = flag(
        "folder for train.jsonl and test.jsonl (each with a .config.json sidecar).")
    dataset: str = flag("the hub dataset read with ``datasets.load_dataset`` (streaming).",
                        "HuggingFaceM4/WebSight")
    config: Optional[str] = flag("the dataset's configuration (None: the dataset's default one).",
                                 "v0.2")
    split: str = flag("the dataset's split the rows come from.", "train")
    data_files: Optional[List[str]] = flag(
        "local file(s) or glob to read instead of the hub dataset (comma-separated).", None)
    train_start: int = flag("the first row (0-based) of the train tasks.", 0)
    train_end: int = flag("the row after the last train task (the range is [start, end)).",
                          10_000)
    test_start: int = flag("the first row (0-based) of the test tasks.", 10_000)
    test_end: int = flag("the row after the last test task (the range is [start, end)).", 20_000)
    overwrite: bool = flag(
        "rebuild the outputs from scratch (the old files are replaced only once the new ones "
        "are complete); by default a re-run resumes them.", False)
    chunk_size: int = flag(
        "tasks buffered between appends (at most this many are redone after a kill).", 200)

    def check(self) -> None:
        from sweet_rl.data.websight import check_ranges

        check_ranges(self.ranges)
        if self.chunk_size < 1:
            raise ValueError(f"--chunk_size must be a positive integer, got {self.chunk_size!r}")

    @property
    def ranges(self) -> Dict[str, tuple]:
        return {"train": (self.train_start, self.train_end),
                "test": (self.test_start, self.test_end)}


def _existing(path: str) -> List[str]:
    """Complete lines already in ``path`` (torn tail removed), as raw JSON text."""
    from sweet_rl.io import count_complete_lines

    if count_complete_lines(path) == 0:
        return []
    with open(path, encoding="utf-8") as handle:
        return [line for line in handle if line.strip()]


def _same_source(output_path: str, arguments: Dict) -> bool:
    """Whether the sidecar says ``output_path`` was finished from this very source and ranges."""
    try:
        with open(output_path + ".config.json", encoding="utf-8") as handle:
            recorded = json.load(handle)["stages"]["prepare_frontend_tasks"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(recorded.get(k) == arguments.get(k) for k in SOURCE_KEYS)


def prepare_frontend_tasks(opts: PrepareFrontendOptions) -> None:
    """Stream the source once, append the missing tasks of both splits, print one line."""
    from sweet_rl.data.websight import describe_source, open_stream
    from sweet_rl.records import RecordError

    ranges, arguments = opts.ranges, opts.flags()
    paths = {name: os.path.join(opts.output_dir, f"{name}.jsonl") for name in SPLITS}
    source = describe_source(opts.dataset, opts.config, opts.data_files)
    started = time.time()
    existing = {name: [] if opts.overwrite else _existing(paths[name]) for name in SPLITS}
    for name in SPLITS:
        start, end = ranges[name]
        if len(existing[name]) > end - start:
            raise RecordError(f"has {len(existing[name])} tasks but the {name} range "
                              f"{start}..{end} holds {end - start}; pass --overwrite to rebuild",
                              path=paths[name])
    complete = all(len(existing[n]) == ranges[n][1] - ranges[n][0] for n in SPLITS)
    if complete and not opts.overwrite and all(_same_source(paths[n], arguments) for n in SPLITS):
        print(f"prepare_frontend_tasks: train {len(existing['train'])} tasks, test "
              f"{len(existing['test'])} tasks already complete -> {opts.output_dir}")
        return
    active = [n for n in SPLITS if ranges[n][0] < ranges[n][1]]
    # Open (and so validate) the source before any output is created or removed.
    stream = (open_stream(opts.dataset, opts.config, opts.split, opts.data_files)
              if active else None)
    final = dict(paths)
    paths = _open_outputs(opts, paths)
    new, rewritten, seen, first = _route(opts, stream, active, paths, existing, source)
    last = max((ranges[n][1] for n in active), default=0)
    if seen < last:
        raise ValueError(f"{source} has only {seen} rows but the ranges need {last} (the tasks "
                         "read so far are written; lower the range ends)")
    _finish(paths, final, arguments)
    counts = {name: len(existing[name]) + new[name] for name in SPLITS}
    print(f"prepare_frontend_tasks: train {counts['train']} tasks ({new['train']} new), test "
          f"{counts['test']} tasks ({new['test']} new), {rewritten} image URLs rewritten in new "
          f"tasks, {seen - first} rows read in {time.time() - started:.1f}s -> {opts.output_dir}")


def _open_outputs(opts: PrepareFrontendOptions, paths: Dict[str, str]) -> Dict[str, str]:
    """The files this run appends to: the outputs, or (--overwrite) new files beside them,
    which replace them once complete; every split gets its file, an empty range an empty one."""
    os.makedirs(opts.output_dir, exist_ok=True)
    if opts.overwrite:
        paths = {name: path + ".new" for name, path in paths.items()}
    for name in SPLITS:
        for stale in (paths[name], paths[name] + ".config.json"):
            if opts.overwrite and os.path.exists(stale):  # a replacing run that failed earlier
                os.remove(stale)
        open(paths[name], "a", encoding="utf-8").close()
    return paths


def _route(opts, stream, active, paths, existing, source):
    """One pass over the rows: each in a range is converted, checked against the line an
    earlier run wrote for it, or appended. ``(new per split, URLs rewritten, rows seen, first
    row)``; the rows converted so far are kept whatever happens."""
    from tqdm import tqdm

    from sweet_rl.data.websight import convert_row
    from sweet_rl.io import append_jsonl
    from sweet_rl.records import RecordError

    ranges = opts.ranges
    first = min((ranges[n][0] for n in active), default=0)
    last = max((ranges[n][1] for n in active), default=0)
    new = {name: 0 for name in SPLITS}
    buffers: Dict[str, List[dict]] = {name: [] for name in SPLITS}
    rewritten, seen = 0, first

    def flush(name: str) -> None:
        if buffers[name]:
            new[name] += append_jsonl(paths[name], buffers[name])
            buffers[name] = []

    bar = tqdm(total=last - first, desc="rows", unit="row")
    try:
        rows = stream.skip(first) if stream is not None and first else (stream or [])
        for index, row in enumerate(rows, start=first):
            if index >= last:
                break
            seen = index + 1
            bar.update(1)
            for name in active:
                start, end = ranges[name]
                if not start <= index < end:
                    continue
                try:
                    task, count = convert_row(row, index)
                except RecordError as err:
                    raise RecordError(err.message, err.field, path=source) from None
                offset = index - start
                if offset < len(existing[name]):  # written by an earlier run: must match
                    if json.loads(existing[name][offset]) != task:
                        raise RecordError(
                            f"task differs from row {index} of {source}; was the file made "
                            "from another source or range? pass --overwrite to rebuild",
                            path=paths[name], line=offset + 1)
                    continue
                rewritten += count
                buffers[name].append(task)
                if len(buffers[name]) >= opts.chunk_size:
                    flush(name)
    finally:
        for name in SPLITS:  # rows converted so far are kept: a re-run resumes after them
            flush(name)
        bar.close()
    return new, rewritten, seen, first


def _finish(paths: Dict[str, str], final: Dict[str, str], arguments: Dict) -> None:
    """The sidecars, and (--overwrite) the new files in the old ones' place."""
    from sweet_rl.io import write_sidecar

    for name in SPLITS:
        write_sidecar(paths[name], arguments, "prepare_frontend_tasks")
        if paths[name] != final[name]:
            os.replace(paths[name], final[name])
            os.replace(paths[name] + ".config.json", final[name] + ".config.json")
