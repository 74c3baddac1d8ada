"""Shard bounds, the facts a shard records, and merging hand-made shard files (no models)."""

import json
import os
import subprocess
import sys

import pytest

from sweet_rl import __version__
from sweet_rl.records import RecordError
from sweet_rl.stages.sharding import merge_shards, shard_bounds, shard_facts
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("total,num_shards,blocks", [
    (10, 3, [(0, 4), (4, 7), (7, 10)]),
    (9, 3, [(0, 3), (3, 6), (6, 9)]),
    (11, 4, [(0, 3), (3, 6), (6, 9), (9, 11)]),
    (2, 4, [(0, 1), (1, 2), (2, 2), (2, 2)]),  # more shards than rows: the last ones are empty
    (0, 2, [(0, 0), (0, 0)]),
    (5, 1, [(0, 5)]),
])
def test_bounds_are_contiguous_blocks_with_the_extra_rows_first(total, num_shards, blocks):
    assert [shard_bounds(total, num_shards, i) for i in range(num_shards)] == blocks


def test_bounds_tile_every_total():
    for total in range(30):
        for num_shards in range(1, 8):
            blocks = [shard_bounds(total, num_shards, i) for i in range(num_shards)]
            assert [lo for lo, _ in blocks[1:]] == [hi for _, hi in blocks[:-1]]
            assert blocks[0][0] == 0 and blocks[-1][1] == total
            sizes = [hi - lo for lo, hi in blocks]
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("num_shards,shard_index,flag", [
    (0, 0, "--num_shards must be an integer of at least 1, got 0"),
    (-2, 0, "--num_shards"),
    (True, 0, "--num_shards"),
    (3, 3, "--shard_index must be an integer in [0, --num_shards) = [0, 3), got 3"),
    (3, -1, "--shard_index"),
    (2, "1", "--shard_index"),
])
def test_bad_flags_are_named(num_shards, shard_index, flag):
    with pytest.raises(ValueError) as err:
        shard_bounds(10, num_shards, shard_index)
    assert flag in str(err.value)


@pytest.mark.parametrize("total,num_shards,block,blocks", [
    (611, 2, 32, [(0, 320), (320, 611)]),  # 20 runs: 10 each, the last run short
    (8, 3, 3, [(0, 3), (3, 6), (6, 8)]),
    (10, 3, 4, [(0, 4), (4, 8), (8, 10)]),
    (5, 4, 4, [(0, 4), (4, 5), (5, 5), (5, 5)]),  # fewer runs than shards
    (0, 2, 4, [(0, 0), (0, 0)]),
])
def test_bounds_in_runs_start_every_shard_at_a_multiple_of_the_block(total, num_shards, block,
                                                                      blocks):
    assert [shard_bounds(total, num_shards, i, block) for i in range(num_shards)] == blocks
    assert all(lo % block == 0 or lo == total for lo, _ in blocks)


def test_a_bad_block_is_named():
    with pytest.raises(ValueError, match="shard block must be an integer of at least 1"):
        shard_bounds(10, 2, 0, 0)


def test_shard_facts():
    assert shard_facts(10, 3, 1) == {"num_shards": 3, "shard_index": 1, "shard_rows": [4, 7, 10]}
    assert shard_facts(7, 1, 0) == {"num_shards": 1, "shard_index": 0, "shard_rows": [0, 7, 7]}
    assert shard_facts(10, 3, 1, 4) == {"num_shards": 3, "shard_index": 1,
                                        "shard_rows": [4, 8, 10], "shard_block": 4}


STAGE = "sample_best_of_n"
ROWS = [{"row": i, "text": f"r\u00e9ponse {i}"} for i in range(10)]  # UTF-8 bytes kept as they are


def _arguments(output_path, num_shards=1, shard_index=0, **changed):
    arguments = {"input_path": "offline.jsonl", "output_path": output_path, "seed": 3,
                 "best_of_n": 4, "to_continue": False, "overwrite": False}
    arguments.update(shard_facts(len(ROWS), num_shards, shard_index), **changed)
    return arguments


def _write(path, rows, stages, version=__version__):
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    with open(path + ".config.json", "w", encoding="utf-8") as handle:
        json.dump({"stages": stages, "sweet_rl_version": version}, handle)
    return path


def _shards(tmp_path, num_shards=3, stage=STAGE, **changed_in_last):
    """Shard files of ROWS as a sharded stage writes them; the last shard's arguments may
    carry changes."""
    paths = []
    for index in range(num_shards):
        lo, hi = shard_bounds(len(ROWS), num_shards, index)
        path = str(tmp_path / f"part{index}.jsonl")
        changes = changed_in_last if index == num_shards - 1 else {}
        paths.append(_write(path, ROWS[lo:hi],
                            {stage: _arguments(path, num_shards, index, **changes)}))
    return paths


def _sidecar(path):
    with open(path + ".config.json", encoding="utf-8") as handle:
        return json.load(handle)


def test_merge_gives_the_single_runs_file_and_sidecar(tmp_path):
    single = _write(str(tmp_path / "single.jsonl"), ROWS,
                    {STAGE: _arguments(str(tmp_path / "single.jsonl"))})
    shards = _shards(tmp_path)
    merged = str(tmp_path / "merged.jsonl")
    # any order of the arguments: the shard indices decide the order of the rows
    assert merge_shards(shards[::-1], merged) == {"shards": 3, "rows": 10, "output_path": merged}
    with open(single, "rb") as a, open(merged, "rb") as b:
        assert a.read() == b.read()
    got, want = _sidecar(merged), _sidecar(single)
    assert got["merged_from"] == shards and got["sweet_rl_version"] == __version__
    assert got["stages"][STAGE] == dict(want["stages"][STAGE], output_path=merged)
    assert got["stages"][STAGE]["shard_rows"] == [0, 10, 10]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]


def test_shards_cut_in_runs_merge_and_a_wrong_block_is_refused(tmp_path):
    paths = []
    for index in range(3):  # 10 rows in runs of 4: 4, 4, 2
        lo, hi = shard_bounds(len(ROWS), 3, index, 4)
        path = str(tmp_path / f"part{index}.jsonl")
        arguments = _arguments(path)
        arguments.update(shard_facts(len(ROWS), 3, index, 4))
        paths.append(_write(path, ROWS[lo:hi], {STAGE: arguments}))
    merged = str(tmp_path / "merged.jsonl")
    merge_shards(paths, merged)
    stage = _sidecar(merged)["stages"][STAGE]
    assert (stage["shard_rows"], stage["shard_block"]) == ([0, 10, 10], 4)
    # a shard whose rows are not its block of runs of the size it records
    sidecar = _sidecar(paths[1])
    sidecar["stages"][STAGE]["shard_block"] = 3
    with open(paths[1] + ".config.json", "w", encoding="utf-8") as handle:
        json.dump(sidecar, handle)
    with pytest.raises(RecordError, match=r"is not block 1 of 3 \(expected \[6, 9, 10\]\)"):
        merge_shards(paths, str(tmp_path / "again.jsonl"), overwrite=True)


def test_merge_keeps_the_stages_every_shard_shares(tmp_path):
    paths = []
    for index in range(2):
        lo, hi = shard_bounds(len(ROWS), 2, index)
        path = str(tmp_path / f"sim{index}.jsonl")
        stages = {"simulate": _arguments(path, 2, index),
                  "evaluate_code": {"saved_path": path, "k": 1, "timeout": 1.0}}
        if index == 1:
            stages["visualize"] = {"output_path": "x.html"}  # on one shard only: left out
        paths.append(_write(path, ROWS[lo:hi], stages))
    merged = str(tmp_path / "merged.jsonl")
    merge_shards(paths, merged)
    stages = _sidecar(merged)["stages"]
    assert sorted(stages) == ["evaluate_code", "simulate"]
    assert stages["evaluate_code"] == {"saved_path": merged, "k": 1, "timeout": 1.0}
    assert stages["simulate"]["num_shards"] == 1 and stages["simulate"]["output_path"] == merged


def test_a_resumed_shard_still_merges(tmp_path):
    merged = str(tmp_path / "merged.jsonl")
    merge_shards(_shards(tmp_path, to_continue=True), merged)
    assert _sidecar(merged)["stages"][STAGE]["to_continue"] is True


def _refused(shards, merged, *parts, error=RecordError):
    with pytest.raises(error) as err:
        merge_shards(shards, merged)
    for part in parts:
        assert part in str(err.value)
    assert not os.path.exists(merged)
    return str(err.value)


def test_refuses_a_missing_sidecar(tmp_path):
    shards = _shards(tmp_path)
    os.remove(shards[1] + ".config.json")
    _refused(shards, str(tmp_path / "m.jsonl"), f"{shards[1]}.config.json: missing")


def test_refuses_shards_of_different_stages(tmp_path):
    shards = _shards(tmp_path, 2)
    (tmp_path / "other").mkdir()
    other = _shards(tmp_path / "other", 2, stage="rank_best_of_n")
    _refused([shards[0], other[1]], str(tmp_path / "m.jsonl"), "field 'stages'",
             "made by different stages", "['sample_best_of_n']", "['rank_best_of_n']")


def test_refuses_a_differing_argument_naming_both_values(tmp_path):
    shards = _shards(tmp_path, seed=4)
    _refused(shards, str(tmp_path / "m.jsonl"), f"{shards[2]}.config.json",
             "field 'stages.sample_best_of_n.seed'", "4 here but 3 in", shards[0])


def test_refuses_another_version(tmp_path):
    shards = _shards(tmp_path, 2)
    _write(shards[1], ROWS[5:], _sidecar(shards[1])["stages"], version="0.0.1")
    _refused(shards, str(tmp_path / "m.jsonl"), "field 'sweet_rl_version'", "'0.0.1' here")


def test_refuses_missing_or_repeated_shards(tmp_path):
    shards = _shards(tmp_path)
    message = _refused(shards[:2], str(tmp_path / "m.jsonl"), "shard(s) [2] of 3 missing",
                       error=ValueError)
    assert "--shard_index 0..2" in message
    _refused([shards[0], shards[1], shards[1]], str(tmp_path / "m.jsonl"),
             "shard 1 given twice", "field 'stages.sample_best_of_n.shard_index'")


def test_refuses_shards_of_different_runs_or_counts(tmp_path):
    (tmp_path / "three").mkdir()
    three, four = _shards(tmp_path / "three", 3), _shards(tmp_path, 4)
    _refused([three[0], four[1]], str(tmp_path / "m.jsonl"),
             "field 'stages.sample_best_of_n.num_shards'", "4 here but 3")
    path = str(tmp_path / "odd.jsonl")
    _write(path, ROWS[4:7], {STAGE: _arguments(path, 3, 1, shard_rows=[4, 8, 10])})
    _refused([three[0], path, three[2]], str(tmp_path / "m.jsonl"),
             "field 'stages.sample_best_of_n.shard_rows'", "not block 1 of 3")


def test_refuses_an_incomplete_shard(tmp_path):
    shards = _shards(tmp_path)
    _write(shards[1], ROWS[4:6], _sidecar(shards[1])["stages"])  # 2 of its 3 rows
    _refused(shards, str(tmp_path / "m.jsonl"), shards[1], "holds 2 rows", "rows 4..7",
             "incomplete shard")
    with open(shards[1], "ab") as handle:
        handle.write(b'{"row": 6, "te')  # a record torn by a killed writer
    _refused(shards, str(tmp_path / "m.jsonl"), "torn line", "incomplete shard")


def test_refuses_files_that_are_not_shards(tmp_path):
    path = _write(str(tmp_path / "plain.jsonl"), ROWS, {"download_data": {"source": "x"}})
    _refused([path], str(tmp_path / "m.jsonl"), "no stage recorded --num_shards")


def test_an_existing_output_needs_overwrite(tmp_path):
    shards = _shards(tmp_path)
    merged = tmp_path / "merged.jsonl"
    merged.write_text("old\n")
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        merge_shards(shards, str(merged))
    assert merged.read_text() == "old\n"
    merge_shards(shards, str(merged), overwrite=True)
    assert len(merged.read_text().splitlines()) == len(ROWS)
    with pytest.raises(ValueError, match="is one of the shards"):
        merge_shards(shards, shards[0], overwrite=True)


def _script(*args, cwd):
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "merge_shards.py"),
                           *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_the_script_merges_and_refuses_in_one_line(tmp_path):
    shards = _shards(tmp_path)
    done = _script(*shards, "--output_path", "merged.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("merge: 3 shards, 10 rows in ")
    assert done.stdout.rstrip().endswith("-> merged.jsonl")
    done = _script(*shards[:2], "--output_path", "other.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: shard(s) [2] of 3 missing")
    assert not (tmp_path / "other.jsonl").exists()
