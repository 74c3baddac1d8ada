"""WebSight v0.2 rows -> ColBench frontend tasks.

ColBench's frontend tasks come from the WebSight v0.2 dataset (``HuggingFaceM4/WebSight``,
config ``v0.2``, one ``train`` split with the columns ``image``, ``text`` and
``llm_generated_idea``). A task is the row's idea as the problem description and its HTML as
the ground truth, with every random-picture URL replaced by one fixed picsum picture of the
same size, so the reference page looks the same on every render:

    source.unsplash.com/random/WxH/...   ->  https://picsum.photos/id/48/W/H
    picsum.photos/W/H?...                 ->  https://picsum.photos/id/48/W/H

The rewrite consumes the whole URL, query string included. (The published task files still
carry the tail of some unsplash keywords, e.g. ``.../id/48/300/200-estate``, left by the
original code's narrower pattern; the renderer shows both forms as the same picture.)

Everything here is pure; :func:`open_stream` is the one place that touches ``datasets``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from sweet_rl.records import RecordError

WEBSIGHT_DATASET = "HuggingFaceM4/WebSight"
WEBSIGHT_CONFIG = "v0.2"
IDEA_COLUMN = "llm_generated_idea"
HTML_COLUMN = "text"
REQUIRED_COLUMNS = (IDEA_COLUMN, HTML_COLUMN)
PICSUM_ID = 48

# A URL ends at whitespace, a quote, an angle bracket, a parenthesis (CSS ``url(...)``) or a
# backslash (HTML inside a JS string). The look-ahead makes a match end exactly there, so a
# look-alike such as ``.../random/800x600abc`` is left alone instead of half rewritten.
_STOP = r"\s\"'<>()\\"
_TAIL = rf"[^{_STOP}]*"
_END = rf"(?=[{_STOP}]|$)"
_SCHEME = r"(?:https?:)?//"
_UNSPLASH_RE = re.compile(
    rf"{_SCHEME}source\.unsplash\.com/random/(\d+)x(\d+)(?:[/?#]{_TAIL})?{_END}", re.IGNORECASE)
# picsum.photos/W/H (and picsum's square form picsum.photos/W); /id/N/... and /seed/... are
# specific pictures, not random ones, so they do not match.
_PICSUM_RE = re.compile(
    rf"{_SCHEME}(?:i\.)?picsum\.photos/(\d+)(?:/(\d+))?(?:[/?#.]{_TAIL})?{_END}", re.IGNORECASE)


def fixed_picture_url(width: Union[int, str], height: Union[int, str]) -> str:
    return f"https://picsum.photos/id/{PICSUM_ID}/{int(width)}/{int(height)}"


def rewrite_image_urls_counted(html: str) -> Tuple[str, int]:
    """:func:`rewrite_image_urls` plus the number of URLs it replaced."""
    html, unsplash = _UNSPLASH_RE.subn(lambda m: fixed_picture_url(m.group(1), m.group(2)), html)
    html, picsum = _PICSUM_RE.subn(
        lambda m: fixed_picture_url(m.group(1), m.group(2) or m.group(1)), html)
    return html, unsplash + picsum


def rewrite_image_urls(html: str) -> str:
    """Replace random-picture URLs by ``https://picsum.photos/id/48/W/H`` of the same size."""
    return rewrite_image_urls_counted(html)[0]


def row_to_task(row: Mapping[str, Any], index: Optional[int] = None) -> Dict[str, str]:
    """One WebSight row -> ``{"problem_description", "ground_truth"}``.

    Raises :class:`RecordError` naming the column (and the 0-based row ``index`` when given)
    if a column is missing or not a string.
    """
    return convert_row(row, index)[0]


def convert_row(row: Mapping[str, Any], index: Optional[int] = None) -> Tuple[Dict[str, str], int]:
    """:func:`row_to_task` plus the number of image URLs rewritten in the row's HTML."""
    where = "" if index is None else f" in row {index}"
    if not isinstance(row, Mapping):
        raise RecordError(f"expected a row with columns {', '.join(REQUIRED_COLUMNS)}{where}, "
                          f"got {type(row).__name__}")
    values = {}
    for column in REQUIRED_COLUMNS:
        if column not in row:
            raise RecordError(f"missing column{where} (WebSight v0.2 rows have "
                              f"'{IDEA_COLUMN}' and '{HTML_COLUMN}'; got {sorted(row)})",
                              field=column)
        value = row[column]
        if not isinstance(value, str):
            raise RecordError(f"expected a string{where}, got {type(value).__name__}", field=column)
        values[column] = value
    html, rewritten = rewrite_image_urls_counted(values[HTML_COLUMN])
    return {"problem_description": values[IDEA_COLUMN], "ground_truth": html}, rewritten


def check_columns(column_names: Optional[Sequence[str]], source: str) -> None:
    """Fail before reading any row when the source's schema lacks a needed column."""
    if column_names is None:  # schema unknown up front: row_to_task checks every row
        return
    missing = [c for c in REQUIRED_COLUMNS if c not in column_names]
    if missing:
        raise RecordError(f"missing column; the source has {list(column_names)}, a WebSight "
                          f"v0.2 source needs {list(REQUIRED_COLUMNS)}", field=missing[0],
                          path=source)


def check_ranges(ranges: Mapping[str, Tuple[int, int]]) -> None:
    """Each ``(start, end)`` row range must be non-negative integers with start <= end, and no
    two ranges may share a row (a test task must never also be a training task)."""
    for name, (start, end) in ranges.items():
        for value in (start, end):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} rows: bounds must be non-negative integers, got "
                                 f"{start!r}..{end!r}")
        if start > end:
            raise ValueError(f"{name} rows: start {start} is after end {end}")
    spans = sorted((s, e, n) for n, (s, e) in ranges.items() if s < e)
    for (s1, e1, n1), (s2, e2, n2) in zip(spans, spans[1:]):
        if s2 < e1:
            raise ValueError(f"{n1} rows {s1}..{e1} and {n2} rows {s2}..{e2} overlap")


def loader_for(data_files: Union[str, Sequence[str]]) -> str:
    """The ``datasets`` builder that reads local files of this extension."""
    first = data_files if isinstance(data_files, str) else (list(data_files) or [""])[0]
    name = first.lower()
    for suffix, builder in ((".parquet", "parquet"), (".jsonl", "json"), (".json", "json"),
                            (".csv", "csv")):
        if name.endswith(suffix):
            return builder
    raise ValueError(f"--data_files {first!r}: expected .parquet, .jsonl, .json or .csv files")


def open_stream(dataset: str = WEBSIGHT_DATASET, config: Optional[str] = WEBSIGHT_CONFIG,
                split: str = "train", data_files: Union[None, str, List[str]] = None):
    """A streaming ``datasets.IterableDataset`` of WebSight-shaped rows with only the needed
    columns. ``data_files`` (local parquet / JSON Lines / CSV) replaces ``dataset``/``config``.

    On parquet sources (the hub's WebSight, local parquet) the column projection happens in
    the reader, so the screenshots in the ``image`` column are never downloaded.
    """
    from datasets import load_dataset

    if data_files:
        for path in [data_files] if isinstance(data_files, str) else data_files:
            if not any(ch in path for ch in "*?[") and not os.path.exists(path):
                raise FileNotFoundError(f"--data_files {path}: no such file")
        path, name, kwargs = loader_for(data_files), None, {"data_files": data_files}
    else:
        path, name, kwargs = dataset, config, {}
    source = describe_source(dataset, config, data_files)
    stream = load_dataset(path, name, split=split, streaming=True, **kwargs)
    check_columns(stream.column_names, source)
    if stream.column_names is not None and set(stream.column_names) - set(REQUIRED_COLUMNS):
        try:
            stream = load_dataset(path, name, split=split, streaming=True,
                                  columns=list(REQUIRED_COLUMNS), **kwargs)
        except (TypeError, ValueError):  # builders without column projection (JSON, CSV)
            stream = stream.select_columns(list(REQUIRED_COLUMNS))
    return stream


def describe_source(dataset: str, config: Optional[str],
                    data_files: Union[None, str, Iterable[str]]) -> str:
    """How error messages name the rows' origin."""
    if data_files:
        return data_files if isinstance(data_files, str) else ", ".join(data_files)
    return f"{dataset} (config {config})" if config else dataset
