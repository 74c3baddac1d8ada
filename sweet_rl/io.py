"""JSONL reading and writing with line-numbered errors and crash-safe appends.

Appends write each record as one complete line with a single ``write`` followed by ``fsync``;
:func:`repair_tail` drops a torn last line (a line without its newline) that a killed run may
have left, so a resumed run never reads half a record and never duplicates one. Whole-file
rewrites go through a temporary file and ``os.replace`` so the old file survives any failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, TypeVar

from sweet_rl.records import Record, RecordError

T = TypeVar("T")


def iter_jsonl(path: str, parse: Optional[Callable[[Any], T]] = None) -> Iterator[T]:
    """Yield each non-blank line of ``path`` as a dict (or ``parse(dict)``).

    Raises :class:`RecordError` naming the file, the 1-based line and, where known, the field.
    """
    if not os.path.exists(path):
        raise RecordError("file not found", path=path)
    with open(path, "r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                # without its newline: a line cut short would otherwise be reported at
                # "line 2, column 1" of itself (where json ran out of text), not where it broke
                data = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as err:
                raise RecordError(f"not valid JSON ({err.msg} at column {err.colno})",
                                  path=path, line=number) from None
            if parse is None:
                yield data
                continue
            try:
                yield parse(data)
            except RecordError as err:
                raise err.located(path, number) from None


def read_jsonl(path: str, parse: Optional[Callable[[Any], T]] = None) -> List[T]:
    return list(iter_jsonl(path, parse))


# a UTF-16 surrogate code point: a Python str may hold one alone (an answer's text, a class
# name or an exception name it made up), UTF-8 has no form for it
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group()):04x}"


def _to_json_line(record: Any) -> bytes:
    """One record as a UTF-8 JSON line, other text than ASCII kept readable. A lone surrogate
    is written as JSON's ``\\udXXX`` escape, which reads back as the same str: JSON text is
    ASCII outside its string literals, so every surrogate found sits inside one. (A high
    surrogate followed by a low one reads back as the one character they encode, as JSON
    defines it.)"""
    data = record.to_dict() if isinstance(record, Record) else record
    text = json.dumps(data, ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape_surrogate, text).encode("utf-8")


def repair_tail(path: str) -> int:
    """Cut a torn final line (no trailing newline) left by a killed writer.

    Returns the number of bytes removed. A file that ends in a newline is untouched.
    """
    if not os.path.exists(path):
        return 0
    size = os.path.getsize(path)
    if size == 0:
        return 0
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return 0
        # Walk back to the last newline; everything after it is the torn record.
        block = 65536
        end = size
        keep = 0
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def count_complete_lines(path: str) -> int:
    """Number of complete, non-blank lines (after :func:`repair_tail`)."""
    if not os.path.exists(path):
        return 0
    repair_tail(path)
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def append_jsonl(path: str, records: Iterable[Any]) -> int:
    """Append records, one whole line per ``write`` call, then fsync. Returns the count."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    count = 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for record in records:
            payload = _to_json_line(record)
            written = 0
            while written < len(payload):
                written += os.write(fd, payload[written:])
            count += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    return count


def _file_mode(path: str) -> int:
    """The permission bits a replaced file should keep: its own, else 0666 less the umask
    (mkstemp's temporary file is 0600, which would otherwise leak into every output)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def atomic_file(path: str, suffix: str = ""):
    """A binary handle on a temporary file beside ``path``; when the block ends without an
    error the file is flushed, given ``path``'s permission bits, fsynced and renamed over
    ``path``; on an error it is removed. Readers never see a half-written file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fchmod(handle.fileno(), _file_mode(path))
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (screenshots, generated pages)."""
    with atomic_file(path, os.path.splitext(path)[1]) as handle:
        handle.write(data)


def write_jsonl(path: str, records: Iterable[Any]) -> int:
    """Replace ``path`` atomically: write a temporary file beside it, then ``os.replace``."""
    count = 0
    with atomic_file(path, ".jsonl") as handle:
        for record in records:
            handle.write(_to_json_line(record))
            count += 1
    return count


def write_json(path: str, data: Dict[str, Any]) -> None:
    """Write a small JSON document atomically (used for the ``.config.json`` sidecars)."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    write_bytes(path, text.encode("utf-8"))


def write_sidecar(output_path: str, arguments: Dict[str, Any], stage: str) -> str:
    """Record the arguments that made ``output_path`` in ``<output_path>.config.json``.

    A file touched by several stages (simulate writes trajectories, evaluate adds rewards)
    keeps one entry per stage under ``"stages"``.
    """
    from sweet_rl import __version__

    sidecar = output_path + ".config.json"
    data: Dict[str, Any] = {}
    if os.path.exists(sidecar):
        try:
            with open(sidecar, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, json.JSONDecodeError):
            data = {}  # a damaged sidecar is replaced, never fatal
    if not isinstance(data.get("stages"), dict):
        data = {"stages": {}}
    data["sweet_rl_version"] = __version__
    data["stages"][stage] = arguments
    write_json(sidecar, data)
    return sidecar


@contextlib.contextmanager
def staged_output(output_path: str, replace: bool):
    """The path a stage writes its output (and sidecar) to.

    Without ``replace``, or when there is nothing to replace, it is ``output_path`` itself.
    When a stage replaces an existing output (``--overwrite``), it writes a staging file beside
    it, ``<output>.new``, which takes the old file's place, with its sidecar, only when the
    block ends without an error: a run that fails (a dead server, bad input, Ctrl-C) leaves the
    old output and its ``.config.json`` exactly as they were, and removes what it staged.
    """
    if not (replace and os.path.exists(output_path)):
        yield output_path
        return
    staging = output_path + ".new"
    leftovers = [staging + suffix for suffix in ("", ".config.json", ".pending.jsonl")]
    for path in leftovers:  # an earlier replacing run that was killed
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
    try:
        yield staging
    except BaseException:
        for path in leftovers:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        raise
    os.replace(staging, output_path)
    sidecar = output_path + ".config.json"
    if os.path.exists(staging + ".config.json"):
        os.replace(staging + ".config.json", sidecar)
    elif os.path.exists(sidecar):  # it described the old file
        os.remove(sidecar)
