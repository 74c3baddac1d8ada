"""Stage: the critic scores every sampled candidate; adds ``judge_result[N]`` to each step record.

See :mod:`sweet_rl.stepwise.ranking` for the arithmetic, :mod:`sweet_rl.stepwise.spans` for
which tokens ``--score_tokens`` averages over, and :mod:`sweet_rl.stepwise.scoring` for the
shared-prompt KV cache. Records are appended chunk by chunk; ``--to_continue`` resumes
a killed run after the records already written. ``--num_shards N --shard_index I`` scores one
contiguous block of the input records (one node each); scripts/merge_shards.py joins the
shard files into the file a single run writes (scoring is deterministic, no record depends on
another).
"""

from __future__ import annotations

import logging
import time
from typing import Optional

logger = logging.getLogger(__name__)


def _identity(record) -> str:
    from sweet_rl.stepwise.turns import dumps_key

    return dumps_key(record["input"], record["additional_outputs"])


def parse_step(data):
    """A StepSample whose candidates are strings and reference scores numbers."""
    from sweet_rl.records import RecordError, StepSample

    sample = StepSample.from_dict(data)
    for key, types in (("additional_outputs", str), ("additional_reference_logprobs", (int, float)),
                       ("additional_reference_logprobs_sum", (int, float))):
        for k, value in enumerate(getattr(sample, key)):
            if not isinstance(value, types) or isinstance(value, bool):
                raise RecordError(f"expected {'a string' if types is str else 'a number'}, "
                                  f"got {type(value).__name__}", field=f"{key}[{k}]")
    return sample


def main(input_path: str, output_path: str, model_id: Optional[str] = None,
         no_use_ground_truth: bool = False, use_sum: bool = False, save_steps: Optional[int] = None,
         # the flags above are the original's, in its order
         score_tokens: str = "original", backend: str = "hf",
         batch_size: int = 16, no_prompt_cache: bool = False, chunk_size: int = 32,
         device: Optional[str] = None, dtype: str = "auto",
         seed: int = 0, to_continue: bool = False, overwrite: bool = False,
         num_shards: int = 1, shard_index: int = 0, critic_type: str = "logprob",
         judge_base_url: Optional[str] = None, api_key: Optional[str] = None,
         screenshots_from: Optional[str] = None):
    """Score each candidate with the critic: judge_result = critic log-prob - reference log-prob
    (``--critic_type logprob``, SWEET-RL's), or the score of another step critic.

    Example (tiny model as the critic, on the CPU):
        python scripts/rank_best_of_n.py --model_id outputs/tiny-llama \\
            --input_path outputs/sampled.jsonl --output_path outputs/ranked.jsonl

    The two paths may also be given by position, in the original's order (as
    sample_best_of_n.py takes them):
        python scripts/rank_best_of_n.py outputs/sampled.jsonl outputs/ranked.jsonl \\
            --model_id outputs/tiny-llama

    Args:
        model_id: the trained critic (path or hub id; ``tiny`` for the embedded tiny model);
            required, as in the original.
        input_path: the sample stage's step records.
        output_path: the same records, each with ``judge_result`` (one score per candidate).
        no_use_ground_truth: condition the critic on ``input`` instead of
            ``input_with_ground_truth`` (the paper's "without training-time information").
        use_sum: compare summed log-probs instead of per-token means (the paper's ablation);
            the critic's sum runs over the same tokens as its mean.
        score_tokens: which tokens of the critic's text (context + candidate) its score
            averages over: ``original`` (default: every token after the first, what the
            original's code did on vLLM 0.6.5), ``turn`` (after the context's last
            end-of-turn token: assistant header + candidate, what the same code does on
            vLLM >= 0.8) or ``candidate`` (the candidate only, the paper's description).
        backend: ``hf`` (transformers) or ``vllm`` (prompt log-probs; a GPU, or vLLM's CPU
            build).
        batch_size: hf candidates per forward pass.
        chunk_size: records written per append (a killed run redoes at most this many).
        save_steps: the original's name for chunk_size (records per write); wins when given.
        no_prompt_cache: hf only: score every candidate with its full prompt instead of
            reusing the turn's prompt KV cache (slower; same numbers up to rounding).
        device: where the hf critic runs (default: cuda when available, else cpu).
        dtype: the critic's dtype ("auto": bf16 on a GPU that has it, fp32 on the CPU; with
            vllm on a GPU, vLLM's own choice).
        seed: the vLLM engine's seed.
        to_continue: resume a killed run after the records already written.
        overwrite: replace an existing output.
        critic_type: ``logprob`` (SWEET-RL), ``regression`` or ``value`` (a critic trained with
            ``train_dpo.py --critic_head regression|value``: the head's score of context +
            candidate), ``judge`` (LLM-as-a-Judge: ``--model_id`` compares the candidates
            two at a time given the reference and the dialogue, in process or at
            ``--judge_base_url``, an OpenAI-compatible server serving ``--model_id``), or
            ``random``, or ``vlm_regression`` (the frontend's vision-language critic,
            ``train_dpo.py --critic_head vlm_regression``: the reference screenshot and
            context + candidate; needs --screenshots_from). Every type writes
            ``judge_result`` (higher = better), so the pair stage and the agent DPO are
            unchanged (sweet_rl/stepwise/judges.py).
        judge_base_url: ``--critic_type judge``: the OpenAI-compatible server serving
            --model_id (default: the judge runs in-process).
        screenshots_from: ``--critic_type vlm_regression``: the evaluated frontend trajectory
            file the step records were sampled from; each turn is scored with its task's
            reference screenshot recorded there.
        api_key: the judge server's key (default: $OPENAI_API_KEY, else EMPTY).
        num_shards: cut the input records into this many contiguous blocks, one run each;
            join the shard files with scripts/merge_shards.py (1: no sharding).
        shard_index: the block this run scores (0-based, below --num_shards).
    """
    arguments = dict(locals())
    from tqdm import tqdm

    import os

    from sweet_rl.factory import build_judge, resolve_model
    from sweet_rl.io import append_jsonl, read_jsonl, staged_output, write_sidecar
    from sweet_rl.stepwise.judges import CRITIC_TYPES
    from sweet_rl.stepwise.ranking import ranked
    from sweet_rl.stepwise.resume import records_done
    from sweet_rl.stepwise.spans import check_mode
    from sweet_rl.sharding import check_shard_flags, shard_facts

    if not input_path or not output_path:
        raise ValueError("INPUT_PATH and OUTPUT_PATH must not be empty (give them by position "
                         "or as --input_path / --output_path)")
    arguments.pop("api_key", None)  # never write secrets into the sidecar
    if critic_type not in CRITIC_TYPES:
        raise ValueError(f"--critic_type must be one of {CRITIC_TYPES}, got {critic_type!r}")
    if not model_id and critic_type != "random":  # never rank with a random tiny critic by accident
        raise ValueError("--model_id is required: the trained critic (path or hub id; "
                         "tiny for the embedded tiny model)")
    check_mode(score_tokens)
    check_shard_flags(num_shards, shard_index)
    if save_steps is not None:
        chunk_size = save_steps
    samples = read_jsonl(input_path, parse_step)  # every record is checked, on every shard
    arguments.update(shard_facts(len(samples), num_shards, shard_index))
    first, last, total = arguments["shard_rows"]
    samples = samples[first:last]
    # path: output_path, or (--overwrite) a file beside it that replaces it when complete
    with staged_output(output_path, overwrite and not to_continue) as path:
        done = records_done(path, [_identity(s.to_dict()) for s in samples], _identity,
                            to_continue, overwrite)
        started = time.time()
        judge = None
        if done < len(samples):
            model = (model_id if judge_base_url or critic_type == "random"
                     else resolve_model(model_id))
            judge = build_judge(critic_type, model, use_ground_truth=not no_use_ground_truth,
                                score_tokens=score_tokens, use_sum=use_sum, backend=backend,
                                device=device, dtype=dtype, batch_size=batch_size,
                                prompt_cache=not no_prompt_cache, seed=seed,
                                judge_base_url=judge_base_url,
                                api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
                                screenshots_from=screenshots_from)
        scored = 0
        step = max(1, int(chunk_size))
        try:
            with tqdm(total=len(samples), initial=done, desc="turns", unit="turn") as bar:
                for start in range(done, len(samples), step):
                    chunk = samples[start:start + step]
                    judged = judge.judge(chunk)  # vLLM: one engine call for the whole chunk
                    append_jsonl(path, [ranked(s, j) for s, j in zip(chunk, judged)])
                    scored += sum(len(s.additional_outputs) for s in chunk)
                    bar.update(len(chunk))
        finally:
            if judge is not None:
                judge.close()
        if not samples:
            append_jsonl(path, [])
        seconds = time.time() - started
        write_sidecar(path, arguments, "rank_best_of_n")
    shard = (f" (shard {shard_index} of {num_shards}: records {first}..{last} of {total})"
             if num_shards > 1 else "")
    print(f"rank_best_of_n: {summarize(output_path)}; scored {scored} candidates in "
          f"{seconds:.1f}s ({scored / max(seconds, 1e-9):.1f}/s){shard} -> {output_path}")
    return output_path


def summarize(path: str) -> str:
    """One metrics line: mean judge_result and its mean spread within a turn."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import StepSample

    count = candidates = 0
    total = spread = 0.0
    for sample in iter_jsonl(path, StepSample.from_dict):
        judge = sample.judge_result or []
        count += 1
        candidates += len(judge)
        total += sum(judge)
        spread += (max(judge) - min(judge)) if judge else 0.0
    if count == 0:
        return "0 turns"
    return (f"{count} turns, mean judge_result {total / max(1, candidates):.4f}, "
            f"mean best-worst spread per turn {spread / count:.4f}")
