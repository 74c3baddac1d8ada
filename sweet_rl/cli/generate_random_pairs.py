"""Stage: per-turn DPO pairs (chosen from the high half, rejected from the low half by
``judge_result``), or with ``--get_sft`` the best candidate of each turn as an SFT example.

The draws, their order and the written bytes are the original's for the same ranked file and
seed (see :mod:`sweet_rl.stepwise.pairs`). The output is rewritten whole (atomically).
"""

from __future__ import annotations

import json
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


def json_lines(records) -> bytes:
    """One ``json.dumps`` line per record with json's defaults (ASCII escapes), the bytes the
    original wrote -- not :mod:`sweet_rl.io`'s UTF-8 lines -- so the files compare equal."""
    return "".join(json.dumps(r) + "\n" for r in records).encode("ascii")


def main(input_path: str, output_path: str, get_sft: bool = False, no_prompt: bool = False,
         num_pairs: int = 8, seed: int = 42, tokenizer: Optional[str] = None):
    """Write {"chosen", "rejected", "prompt"} pairs (or SFT records) from ranked step records.

    Example (tiny model's tokenizer for the end-of-turn token):
        python scripts/generate_random_pairs_from_ranks.py outputs/ranked.jsonl \\
            outputs/agent_pairs.jsonl --no_prompt --num_pairs 4 --tokenizer outputs/tiny-llama

    Args:
        input_path: ranked step records (from rank_best_of_n).
        output_path: JSONL for scripts/train_dpo.py (or SFT records with --get_sft).
        num_pairs: pairs drawn per turn (with replacement; 8 as in the original; the paper's
            agent data uses 4). Pairs whose two texts are identical are dropped.
        no_prompt: {"chosen": input + output + eos, "rejected": ...} instead of a "prompt" key.
        get_sft: {"prompt": input, "completion": best output + eos, "judge_result"} per turn.
        seed: the draws' random seed (42, the original's).
        tokenizer: the agent's tokenizer (path or hub id) whose eos token ends each response;
            default: the embedded tiny model's.
    """
    arguments = dict(locals())
    import random

    from sweet_rl.factory import resolve_model
    from sweet_rl.hf_generation import load_tokenizer
    from sweet_rl.io import read_jsonl, write_bytes, write_sidecar
    from sweet_rl.stepwise.pairs import pair_records, sft_record

    samples = read_jsonl(input_path, parse_ranked)
    eos = load_tokenizer(resolve_model(tokenizer)).eos_token or ""
    started = time.time()
    dropped = 0
    if get_sft:
        out = [sft_record(sample, eos) for sample in samples]
    else:
        out, dropped = pair_records(samples, num_pairs, random.Random(seed), eos, no_prompt)
    write_bytes(output_path, json_lines(out))
    write_sidecar(output_path, arguments, "generate_random_pairs")
    kind = "SFT records" if get_sft else "pairs"
    print(f"generate_random_pairs: {len(out)} {kind} from {len(samples)} turns "
          f"({dropped} identical-text pairs dropped), eos {eos!r}, in "
          f"{time.time() - started:.1f}s -> {output_path}")
    return output_path
