"""Stage: N candidate actions at every assistant turn of the offline data, with reference log-probs.

Output: one step record per assistant turn of the first ``data_fraction`` of the trajectories
(see :mod:`sweet_rl.stepwise.turns` and :mod:`sweet_rl.stepwise.sampling`). Records are
appended chunk by chunk (:mod:`sweet_rl.stages.chunked`); each record's sampling seed depends
only on ``--seed`` and its global position among those records, so a killed run resumed with
``--to_continue`` ends with the file a full run writes, and ``--num_shards N --shard_index I``
(one contiguous block of the records per node, each starting at a multiple of --chunk_size, so
each forms the single run's chunks and batches) gives pieces that ``scripts/merge_shards.py``
joins into that same file, byte for byte.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sweet_rl.flags import flag
from sweet_rl.stages.chunked import ChunkedStage, run_chunked
from sweet_rl.stages.groups import ChunkedRunOptions, EngineOptions, SamplingOptions

logger = logging.getLogger(__name__)

# The original's default agent (it named a copy on its cluster); written as its hub id.
ORIGINAL_AGENT = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(kw_only=True)
class SampleOptions(SamplingOptions, EngineOptions, ChunkedRunOptions):
    """Sample --best_of_n candidates per assistant turn and score them under the sampler.

    Example (the embedded tiny model on the CPU; offline.jsonl from simulate + evaluate, or
    ``python -m sweet_rl.cli.offline_demo`` + ``scripts/evaluate_code.py --k 3``):
        python scripts/sample_best_of_n.py outputs/offline.jsonl outputs/sampled.jsonl \\
            --agent_model tiny --best_of_n 4 --max_new_tokens 16

    The two paths may also be given as flags (``--input_path IN --output_path OUT``).

    The paper's setting (10% of the offline data, 16 samples per turn, on GPUs):
        python scripts/sample_best_of_n.py offline.jsonl sampled.jsonl \\
            --agent_model meta-llama/Llama-3.1-8B-Instruct --best_of_n 16 --data_fraction 0.1 \\
            --backend vllm
    """

    POSITIONAL = ("input_path", "output_path", "agent_model", "temperature", "best_of_n",
                  "data_fraction")
    input_path: str = flag(
        "evaluated trajectories (``task``, ``dialogue_history``, ``answer``, ``reward``).")
    output_path: str = flag("step records with ``additional_outputs`` and reference log-probs.")
    agent_model: str = flag(
        "the agent that samples (path or hub id); default: the original's, "
        "meta-llama/Llama-3.1-8B-Instruct (the run logs which model it uses); ``tiny`` "
        "selects the embedded tiny random model.", ORIGINAL_AGENT)
    best_of_n: int = flag("candidates per turn (N).", 16)
    data_fraction: float = flag(
        "share of the trajectories used, taken from the top of the file.", 1.0)
    exclude_stop_token: bool = flag(
        "leave the end-of-turn token a candidate stopped on out of its reference log-probs "
        "(the original, via vLLM's per-token log-probs, includes it).", False)

    def check(self) -> None:
        if not self.agent_model:
            raise ValueError("--agent_model is empty: name the model that samples the "
                             f"candidates (path or hub id; default {ORIGINAL_AGENT}; tiny for "
                             "the embedded tiny model)")
        if self.best_of_n < 1:
            raise ValueError(f"--best_of_n must be at least 1, got {self.best_of_n}")


class Sampling(ChunkedStage):
    """Step records in, the same records with N candidates and their log-probs out."""

    name = "sample_best_of_n"

    def __init__(self, opts: SampleOptions):
        super().__init__(opts)
        # shards start at a multiple of chunk_size, so each forms the single run's chunks
        # (and batches): the merged file is byte for byte the single run's
        self.block = opts.chunk_size
        self.used = 0

    def read(self):
        from sweet_rl.stepwise.turns import read_turn_records

        records, self.used = read_turn_records(self.opts.input_path, self.opts.data_fraction)
        return records

    def key(self, record):
        from sweet_rl.stepwise.turns import dumps_key

        return dumps_key(record.input, record.older_output)

    def open(self):
        from sweet_rl.stages.factory import resolve_model
        from sweet_rl.stepwise.sampling import build_sampler

        opts = self.opts
        try:
            return build_sampler(opts.backend, resolve_model(opts.agent_model), opts.temperature,
                                 opts.max_new_tokens, opts.device, opts.dtype, opts.batch_size,
                                 opts.seed, include_stop=not opts.exclude_stop_token)
        except OSError as err:  # neither a folder nor loadable from the hub
            raise OSError(f"cannot load --agent_model {opts.agent_model}: {err}") from err

    def process(self, worker, chunk, first):
        from sweet_rl.seeding import row_seed
        from sweet_rl.stepwise.sampling import with_candidates

        # a record's seed depends on its global index only, so a resumed run and the shard
        # holding the record draw what a single run does
        seeds = [row_seed(self.opts.seed, first + i) for i in range(len(chunk))]
        results = worker.sample([r.input for r in chunk], self.opts.best_of_n, seeds)
        return [with_candidates(r, outputs, scores)
                for r, (outputs, scores) in zip(chunk, results)]

    def summary(self, path, seconds):
        return f"{summarize(path)} from {self.used} trajectories in {seconds:.1f}s"


def sample(opts: SampleOptions) -> str:
    """Sample the candidates of every turn (resumable, shardable); returns the output path."""
    logger.info("sampling with %s%s", opts.agent_model,
                " (the original's default agent; --agent_model picks another)"
                if opts.agent_model == ORIGINAL_AGENT else "")
    return run_chunked(Sampling(opts))


def summarize(path: str) -> str:
    """One metrics line over the whole output file."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import StepSample

    count = candidates = 0
    mean_sum = distinct = 0.0
    for sample_ in iter_jsonl(path, StepSample.from_dict):
        count += 1
        candidates += len(sample_.additional_outputs)
        mean_sum += sum(sample_.additional_reference_logprobs)
        distinct += len(set(sample_.additional_outputs)) / max(1, len(sample_.additional_outputs))
    if count == 0:
        return "0 turns"
    return (f"{count} turns, {candidates} candidates, mean reference log-prob/token "
            f"{mean_sum / max(1, candidates):.3f}, distinct candidates "
            f"{100 * distinct / count:.1f}%")
