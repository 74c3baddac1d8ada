"""The skeleton sample and rank share: read every input record, keep this shard's block,
stage the output (``--overwrite`` replaces it only when complete), skip the records a resumed
run already holds, load the model only when there is work, append chunk by chunk, write the
sidecar, print one line.

A stage says what differs in a :class:`ChunkedStage`; :func:`run_chunked` runs it. Each
record's result may depend only on the record and its index among all records (sampling seeds
do), so a resumed run and the shards of a run write, together, the file one run writes.
"""

from __future__ import annotations

import time
from typing import Any, List

from sweet_rl.records import StepSample
from sweet_rl.stages.groups import ChunkedRunOptions


class ChunkedStage:
    """One chunked stage; ``opts`` are its options (:class:`ChunkedRunOptions` and its own)."""

    name = "chunked"  # the sidecar's stage name and the metrics line's first word
    block = 1  # shards start at a multiple of this many records

    def __init__(self, opts: ChunkedRunOptions):
        self.opts = opts
        self.chunk_size = opts.chunk_size  # records per append

    def read(self) -> List[StepSample]:
        """Every input record of the whole run, checked (before anything is written)."""
        raise NotImplementedError

    def key(self, record: StepSample) -> str:
        """What identifies an input record; the same for the output record it becomes (which
        keeps the fields the key is made of), so a resumed run checks its lines by it."""
        raise NotImplementedError

    def open(self) -> Any:
        """The model (or judge) that does the work; called only when there is work."""
        raise NotImplementedError

    def process(self, worker: Any, chunk: List[StepSample], first: int) -> List[StepSample]:
        """The output records of ``chunk``, whose first record is record ``first`` of the run."""
        raise NotImplementedError

    def close(self, worker: Any) -> None:
        worker.close()

    def summary(self, path: str, seconds: float) -> str:
        """The metrics line's text after the stage's name (the output file is complete)."""
        raise NotImplementedError


def run_chunked(stage: ChunkedStage) -> str:
    """Run ``stage`` (see the module docstring); returns the output path."""
    from tqdm import tqdm

    from sweet_rl.io import append_jsonl, staged_output, write_sidecar
    from sweet_rl.stages.sharding import shard_facts
    from sweet_rl.stepwise.resume import records_done

    opts = stage.opts
    records = stage.read()  # every record is checked, on every shard
    arguments = opts.flags()
    arguments.update(shard_facts(len(records), opts.num_shards, opts.shard_index, stage.block))
    first, last, total = arguments["shard_rows"]
    records = records[first:last]
    # path: output_path, or (--overwrite) a file beside it that replaces it when complete
    with staged_output(opts.output_path, opts.overwrite and not opts.to_continue) as path:
        done = records_done(path, [stage.key(r) for r in records], stage.key,
                            opts.to_continue, opts.overwrite)
        started = time.time()
        worker = stage.open() if done < len(records) else None
        try:
            with tqdm(total=len(records), initial=done, desc="turns", unit="turn") as bar:
                for start in range(done, len(records), stage.chunk_size):
                    chunk = records[start:start + stage.chunk_size]
                    append_jsonl(path, stage.process(worker, chunk, first + start))
                    bar.update(len(chunk))
        finally:
            if worker is not None:
                stage.close(worker)
        if not records:
            append_jsonl(path, [])  # an empty but existing output, like a full run's
        seconds = time.time() - started
        write_sidecar(path, arguments, stage.name)
    shard = (f" (shard {opts.shard_index} of {opts.num_shards}: records {first}..{last} of "
             f"{total})" if opts.num_shards > 1 else "")
    print(f"{stage.name}: {stage.summary(opts.output_path, seconds)}{shard} -> "
          f"{opts.output_path}")
    return opts.output_path
