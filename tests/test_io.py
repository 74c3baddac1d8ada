import json
import os

import pytest

from sweet_rl.io import (append_jsonl, count_complete_lines, read_jsonl, repair_tail,
                         write_jsonl, write_sidecar)
from sweet_rl.records import RecordError, Task


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"problem_description": "a", "ground_truth": "b"}\n{not json}\n')
    with pytest.raises(RecordError) as err:
        read_jsonl(str(path), Task.from_dict)
    assert err.value.line == 2 and str(path) in str(err.value) and "line 2" in str(err.value)


def test_missing_field_names_file_line_and_field(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '\n{"problem_description": "a", "ground_truth": "b"}\n{"problem_description": "a"}\n'
    )
    with pytest.raises(RecordError) as err:
        read_jsonl(str(path), Task.from_dict)
    assert (err.value.line, err.value.field) == (3, "ground_truth")
    assert f"{path}, line 3: field 'ground_truth': missing" == str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(RecordError, match="file not found"):
        read_jsonl(str(tmp_path / "nope.jsonl"))


def test_append_then_repair_a_torn_tail(tmp_path):
    path = str(tmp_path / "out.jsonl")
    assert append_jsonl(path, [{"a": 1}, {"a": 2}]) == 2
    with open(path, "ab") as handle:  # what a writer killed mid-record leaves behind
        handle.write(b'{"a": 3, "b": "half')
    assert count_complete_lines(path) == 2  # repairs, then counts
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert repair_tail(path) == 0
    append_jsonl(path, [{"a": 3}])
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_repair_tail_of_a_file_that_is_all_torn(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"a": ')
    assert repair_tail(str(path)) == 6 and path.read_bytes() == b""


def test_write_jsonl_keeps_old_file_when_a_record_fails(tmp_path):
    path = str(tmp_path / "out.jsonl")
    write_jsonl(path, [{"a": 1}])

    def records():
        yield {"a": 2}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_jsonl(path, records())
    assert read_jsonl(path) == [{"a": 1}]
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")] == []


def test_sidecar_keeps_one_entry_per_stage(tmp_path):
    out = str(tmp_path / "traj.jsonl")
    write_sidecar(out, {"k": 1}, "simulate")
    write_sidecar(out, {"k": 2}, "evaluate_code")
    data = json.loads(open(out + ".config.json").read())
    assert data["stages"] == {"simulate": {"k": 1}, "evaluate_code": {"k": 2}}


def test_atomic_rewrite_keeps_the_file_mode(tmp_path):
    path = tmp_path / "run.jsonl"
    write_jsonl(str(path), [{"a": 1}])
    assert path.stat().st_mode & 0o777 == 0o666 & ~_current_umask()  # a new file: umask applies
    path.chmod(0o640)
    write_jsonl(str(path), [{"a": 2}])
    assert path.stat().st_mode & 0o777 == 0o640  # a rewritten file keeps its own mode


def _current_umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_line_cut_short_reports_the_column_where_it_broke(tmp_path):
    # '{"task": 1, "answer"' stops after 20 characters: json expects a ':' at column 21, on
    # this line (with the newline left in, json said "line 2 column 1" and we said column 1)
    path = tmp_path / "cut.jsonl"
    path.write_text('{"ok": 1}\n{"task": 1, "answer"\n', encoding="utf-8")
    with pytest.raises(RecordError, match=r"cut.jsonl, line 2: not valid JSON \(Expecting ':' "
                                          r"delimiter at column 21\)"):
        read_jsonl(str(path))
