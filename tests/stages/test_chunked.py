"""The skeleton sample and rank share (sweet_rl.stages.chunked), with a stage whose work is
arithmetic: resumed runs and shards write what one run writes, the model opens only when
there is work, an existing output is kept unless asked, and the sidecar records the options."""

import json
from dataclasses import dataclass

import pytest

from sweet_rl.flags import flag
from sweet_rl.io import read_jsonl
from sweet_rl.records import StepSample
from sweet_rl.stages.chunked import ChunkedStage, run_chunked
from sweet_rl.stages.groups import ChunkedRunOptions
from sweet_rl.stages.sharding import merge_shards


@dataclass(kw_only=True)
class DoubleOptions(ChunkedRunOptions):
    """A stand-in chunked stage."""

    output_path: str = flag("where the doubled records go.")
    count: int = flag("how many records.", 7)


def _line(i, value=None):
    return {"input": f"turn {i}", "input_with_ground_truth": f"truth turn {i}",
            "older_output": "", "reward": 1.0, "ground_truth": "truth", "messages": [],
            "additional_outputs": [f"candidate {i}"],
            "additional_reference_logprobs": [-1.0 if value is None else value],
            "additional_reference_logprobs_sum": [-1.0]}


def _record(i, value=None):
    return StepSample.from_dict(_line(i, value))


class Double(ChunkedStage):
    """Record i becomes its reference score doubled plus i (its index among all records)."""

    name = "double"

    def __init__(self, opts, fail_at=None):
        super().__init__(opts)
        self.opened, self.chunks, self.fail_at = 0, [], fail_at

    def read(self):
        return [_record(i) for i in range(self.opts.count)]

    def key(self, record):
        return record.input

    def open(self):
        self.opened += 1
        return self

    def close(self, worker):
        assert worker is self

    def process(self, worker, chunk, first):
        if self.fail_at is not None and first >= self.fail_at:
            raise KeyboardInterrupt  # a kill between two chunks
        self.chunks.append((first, len(chunk)))
        return [_record(first + i, 2 * r.additional_reference_logprobs[0] + first + i)
                for i, r in enumerate(chunk)]

    def summary(self, path, seconds):
        return f"{len(read_jsonl(path))} records"


def test_chunks_resume_shards_and_sidecar(tmp_path, capsys):
    whole = tmp_path / "whole.jsonl"
    stage = Double(DoubleOptions(output_path=str(whole), chunk_size=3))
    assert run_chunked(stage) == str(whole)
    assert stage.chunks == [(0, 3), (3, 3), (6, 1)] and stage.opened == 1
    expected = [_line(i, -2.0 + i) for i in range(7)]
    assert read_jsonl(str(whole)) == expected
    assert capsys.readouterr().out.strip().endswith(f"double: 7 records -> {whole}")
    recorded = json.loads((tmp_path / "whole.jsonl.config.json").read_text())["stages"]["double"]
    assert recorded == dict(DoubleOptions(output_path=str(whole), chunk_size=3).flags(),
                            num_shards=1, shard_index=0, shard_rows=[0, 7, 7])

    # killed after its first chunk, then resumed: the same file; nothing redone
    killed = tmp_path / "killed.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_chunked(Double(DoubleOptions(output_path=str(killed), chunk_size=3), fail_at=3))
    assert len(read_jsonl(str(killed))) == 3
    with pytest.raises(FileExistsError, match="--to_continue to resume it or --overwrite"):
        run_chunked(Double(DoubleOptions(output_path=str(killed), chunk_size=3)))
    resumed = Double(DoubleOptions(output_path=str(killed), chunk_size=3, to_continue=True))
    run_chunked(resumed)
    assert resumed.chunks == [(3, 3), (6, 1)] and read_jsonl(str(killed)) == expected
    done = Double(DoubleOptions(output_path=str(killed), chunk_size=3, to_continue=True))
    run_chunked(done)
    assert done.opened == 0  # nothing left to do: no model is loaded

    # three shards, merged: the single run's file
    pieces = [str(tmp_path / f"shard{i}.jsonl") for i in range(3)]
    for index, piece in enumerate(pieces):
        run_chunked(Double(DoubleOptions(output_path=piece, chunk_size=3, num_shards=3,
                                         shard_index=index)))
    assert "(shard 2 of 3: records 5..7 of 7)" in capsys.readouterr().out
    merge_shards(pieces, str(tmp_path / "merged.jsonl"))
    assert (tmp_path / "merged.jsonl").read_bytes() == whole.read_bytes()


def test_overwrite_replaces_only_a_complete_output(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"keep": "me"}\n')
    with pytest.raises(KeyboardInterrupt):
        run_chunked(Double(DoubleOptions(output_path=str(out), overwrite=True), fail_at=0))
    assert out.read_text() == '{"keep": "me"}\n'
    run_chunked(Double(DoubleOptions(output_path=str(out), overwrite=True)))
    assert len(read_jsonl(str(out))) == 7
