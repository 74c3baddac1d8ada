"""Stage: per-turn DPO pairs (chosen from the top half, rejected from the bottom half by
``judge_result``), or with ``--get_sft`` the best candidate of each turn as an SFT example.

The output is rewritten whole (atomically); see :mod:`sweet_rl.stepwise.pairs` for layouts.
"""

from __future__ import annotations

import time
from typing import Optional


def parse_ranked(data):
    """A ranked step record: StepSample with ``judge_result`` of numbers."""
    from sweet_rl.records import RecordError
    from sweet_rl.cli.rank_best_of_n import parse_step

    sample = parse_step(data)
    if sample.judge_result is None:
        raise RecordError("missing (run the rank stage first)", field="judge_result")
    for k, value in enumerate(sample.judge_result):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RecordError(f"expected a number, got {type(value).__name__}",
                              field=f"judge_result[{k}]")
    return sample.to_dict()


def main(input_path: str, output_path: str, num_pairs: int = 4, no_prompt: bool = False,
         get_sft: bool = False, seed: int = 0, tokenizer: Optional[str] = None):
    """Write {"prompt", "chosen", "rejected"} pairs (or SFT records) from ranked step records.

    Example (tiny model's tokenizer for the end-of-turn token):
        python scripts/generate_random_pairs_from_ranks.py outputs/ranked.jsonl \\
            outputs/agent_pairs.jsonl --no_prompt --num_pairs 4 --tokenizer outputs/tiny-llama

    Args:
        input_path: ranked step records (from rank_best_of_n).
        output_path: JSONL for scripts/train_dpo.py (or SFT records with --get_sft).
        num_pairs: pairs drawn per turn (with replacement; identical texts skipped).
        no_prompt: {"chosen": input + output + eos, "rejected": ...} instead of a "prompt" key.
        get_sft: {"prompt": input, "completion": best output + eos, "judge_result"} per turn.
        seed: the draws' random seed.
        tokenizer: the agent's tokenizer (path or hub id) whose eos token ends each response;
            default: the embedded tiny model's.
    """
    arguments = dict(locals())
    import random

    from tqdm import tqdm

    from sweet_rl.factory import resolve_model
    from sweet_rl.hf_generation import load_tokenizer
    from sweet_rl.io import read_jsonl, write_jsonl, write_sidecar
    from sweet_rl.stepwise.pairs import sft_record, turn_pairs

    samples = read_jsonl(input_path, parse_ranked)
    eos = load_tokenizer(resolve_model(tokenizer)).eos_token or ""
    started = time.time()
    rng = random.Random(seed)
    out, skipped = [], 0
    for sample in tqdm(samples, desc="turns", unit="turn", disable=len(samples) < 1000):
        if get_sft:
            out.append(sft_record(sample, eos))
            continue
        records, same = turn_pairs(sample, num_pairs, rng, eos, no_prompt)
        out.extend(records)
        skipped += same
    write_jsonl(output_path, out)
    write_sidecar(output_path, arguments, "generate_random_pairs")
    kind = "SFT records" if get_sft else "pairs"
    print(f"generate_random_pairs: {len(out)} {kind} from {len(samples)} turns "
          f"({skipped} identical draws skipped), eos {eos!r}, in {time.time() - started:.1f}s "
          f"-> {output_path}")
    return output_path
