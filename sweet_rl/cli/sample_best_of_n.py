"""Stage: N candidate actions at every assistant turn of the offline data, with reference log-probs.

Output: one step record per assistant turn of the first ``data_fraction`` of the trajectories
(see :mod:`sweet_rl.stepwise.turns` and :mod:`sweet_rl.stepwise.sampling`). Records are
appended chunk by chunk; each record's sampling seed depends only on ``--seed`` and its global
position among those records, so a killed run resumed with ``--to_continue`` ends with the file
a full run writes, and ``--num_shards N --shard_index I`` (one contiguous block of the records
per node, see :mod:`sweet_rl.sharding`) gives pieces that ``scripts/merge_shards.py`` joins
into that same file.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

logger = logging.getLogger(__name__)


def _identity(record) -> str:
    from sweet_rl.stepwise.turns import dumps_key

    return dumps_key(record["input"], record["older_output"])


# The original's default agent (it named a copy on its cluster); written as its hub id.
ORIGINAL_AGENT = "meta-llama/Llama-3.1-8B-Instruct"


def main(input_path: str, output_path: str, agent_model: str = ORIGINAL_AGENT,
         temperature: float = 1.0, best_of_n: int = 16, data_fraction: float = 1.0,
         backend: str = "hf", max_new_tokens: int = 1024, seed: int = 0,
         batch_size: int = 16, chunk_size: int = 32, device: Optional[str] = None,
         dtype: str = "auto", exclude_stop_token: bool = False, to_continue: bool = False,
         overwrite: bool = False, num_shards: int = 1, shard_index: int = 0):
    """Sample ``best_of_n`` candidates per assistant turn and score them under the sampler.

    Example (the embedded tiny model on the CPU; offline.jsonl from simulate + evaluate, or
    ``python -m sweet_rl.cli.offline_demo`` + ``scripts/evaluate_code.py --k 3``):
        python scripts/sample_best_of_n.py outputs/offline.jsonl outputs/sampled.jsonl \\
            --agent_model tiny --best_of_n 4 --max_new_tokens 16

    The two paths may also be given as flags (``--input_path IN --output_path OUT``).

    The paper's setting (10% of the offline data, 16 samples per turn, on GPUs):
        python scripts/sample_best_of_n.py offline.jsonl sampled.jsonl \\
            --agent_model meta-llama/Llama-3.1-8B-Instruct --best_of_n 16 --data_fraction 0.1 \\
            --backend vllm

    Args:
        input_path: evaluated trajectories (``task``, ``dialogue_history``, ``answer``, ``reward``).
        output_path: step records with ``additional_outputs`` and reference log-probs.
        agent_model: the agent that samples (path or hub id); default: the original's,
            meta-llama/Llama-3.1-8B-Instruct (the run logs which model it uses); ``tiny``
            selects the embedded tiny random model.
        temperature: the sampling temperature.
        best_of_n: candidates per turn (N).
        data_fraction: share of the trajectories used, taken from the top of the file.
        backend: ``hf`` (transformers) or ``vllm`` (a GPU, or vLLM's CPU build).
        max_new_tokens: the token budget of each candidate.
        seed: base of every record's sampling seed.
        batch_size: hf rows per generate/score call.
        chunk_size: records written per append (a killed run redoes at most this many).
        device: where the hf model runs (default: cuda when available, else cpu).
        dtype: the model's dtype ("auto": bf16 on a GPU that has it, fp32 on the CPU; with
            vllm on a GPU, vLLM's own choice).
        exclude_stop_token: leave the end-of-turn token a candidate stopped on out of its
            reference log-probs (the original, via vLLM's per-token log-probs, includes it).
        to_continue: resume a killed run after the records already written.
        overwrite: replace an existing output.
        num_shards: cut the step records (the turns of the ``data_fraction`` selection,
            made first and the same on every shard) into this many contiguous blocks, each
            starting at a multiple of --chunk_size, one run each; join the shard files with
            scripts/merge_shards.py. Each record's seed uses its index among all records and
            each shard forms the single run's chunks, so the merged file is the unsharded
            run's, byte for byte.
        shard_index: the block this run writes (0-based, below --num_shards).
    """
    arguments = dict(locals())
    from tqdm import tqdm

    from sweet_rl.factory import resolve_model
    from sweet_rl.io import append_jsonl, staged_output, write_sidecar
    from sweet_rl.stepwise.resume import records_done
    from sweet_rl.stepwise.sampling import build_sampler, with_candidates
    from sweet_rl.seeding import row_seed
    from sweet_rl.sharding import check_shard_flags, shard_facts
    from sweet_rl.stepwise.turns import read_turn_records

    if agent_model in (None, ""):
        raise ValueError("--agent_model is empty: name the model that samples the candidates "
                         f"(path or hub id; default {ORIGINAL_AGENT}; tiny for the embedded "
                         "tiny model)")
    logger.info("sampling with %s%s", agent_model,
                " (the original's default agent; --agent_model picks another)"
                if agent_model == ORIGINAL_AGENT else "")
    if int(best_of_n) < 1:
        raise ValueError(f"--best_of_n must be at least 1, got {best_of_n}")
    check_shard_flags(num_shards, shard_index)
    # Validate every input before touching the output file.
    records, used = read_turn_records(input_path, data_fraction)
    # the selection above is the whole run's; this shard keeps its block of the records
    # shards start at a multiple of chunk_size, so each forms the single run's chunks (and
    # batches): the merged file is byte for byte the single run's, not only up to float noise
    arguments.update(shard_facts(len(records), num_shards, shard_index,
                                 max(1, int(chunk_size))))
    first, last, total = arguments["shard_rows"]
    records = records[first:last]
    # path: output_path, or (--overwrite) a file beside it that replaces it when complete
    with staged_output(output_path, overwrite and not to_continue) as path:
        done = records_done(path, [_identity(r) for r in records], _identity,
                            to_continue, overwrite)
        started = time.time()
        sampler = None
        if done < len(records):
            try:
                sampler = build_sampler(backend, resolve_model(agent_model), temperature,
                                        max_new_tokens, device, dtype, batch_size, seed,
                                        include_stop=not exclude_stop_token)
            except OSError as err:  # neither a folder nor loadable from the hub
                raise OSError(f"cannot load --agent_model {agent_model}: {err}") from err
        try:
            with tqdm(total=len(records), initial=done, desc="turns", unit="turn") as bar:
                for start in range(done, len(records), max(1, int(chunk_size))):
                    chunk = records[start:start + max(1, int(chunk_size))]
                    # a record's seed depends on its global index only, so a resumed run and the
                    # shard holding the record draw what a single run does
                    seeds = [row_seed(seed, first + start + i) for i in range(len(chunk))]
                    results = sampler.sample([r["input"] for r in chunk], int(best_of_n), seeds)
                    append_jsonl(path, [with_candidates(r, outputs, scores)
                                        for r, (outputs, scores) in zip(chunk, results)])
                    bar.update(len(chunk))
        finally:
            if getattr(sampler, "close", None) is not None:
                sampler.close()  # the vLLM engine, at once
        if not records:
            append_jsonl(path, [])  # an empty but existing output, like a full run's
        write_sidecar(path, arguments, "sample_best_of_n")
    shard = (f" (shard {shard_index} of {num_shards}: records {first}..{last} of {total})"
             if num_shards > 1 else "")
    print(f"sample_best_of_n: {summarize(output_path)} from {used} trajectories{shard} "
          f"in {time.time() - started:.1f}s -> {output_path}")
    return output_path


def summarize(path: str) -> str:
    """One metrics line over the whole output file."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import StepSample

    count = candidates = 0
    mean_sum = distinct = 0.0
    for sample in iter_jsonl(path, StepSample.from_dict):
        count += 1
        candidates += len(sample.additional_outputs)
        mean_sum += sum(sample.additional_reference_logprobs)
        distinct += len(set(sample.additional_outputs)) / max(1, len(sample.additional_outputs))
    if count == 0:
        return "0 turns"
    return (
        f"{count} turns, {candidates} candidates, mean reference log-prob/token "
        f"{mean_sum / max(1, candidates):.3f}, distinct candidates {100 * distinct / count:.1f}%"
    )
