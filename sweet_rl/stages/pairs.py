"""Stage: per-turn DPO pairs (chosen from the high half, rejected from the low half by
``judge_result``), or with ``--get_sft`` the best candidate of each turn as an SFT example.

The draws, their order and the written bytes are the original's for the same ranked file and
seed (see :mod:`sweet_rl.stepwise.pairs`). The output is rewritten whole (atomically).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import Options, flag


@dataclass(kw_only=True)
class PairsOptions(Options):
    """Write {"chosen", "rejected", "prompt"} pairs (or SFT records) from ranked step records.

    Example (tiny model's tokenizer for the end-of-turn token):
        python scripts/generate_random_pairs_from_ranks.py outputs/ranked.jsonl \\
            outputs/agent_pairs.jsonl --no_prompt --num_pairs 4 --tokenizer outputs/tiny-llama
    """

    POSITIONAL = ("input_path", "output_path", "get_sft", "no_prompt", "num_pairs")
    input_path: str = flag("ranked step records (from rank_best_of_n).")
    output_path: str = flag("JSONL for scripts/train_dpo.py (or SFT records with --get_sft).")
    get_sft: bool = flag(
        "{\"prompt\": input, \"completion\": best output + eos, \"judge_result\"} per turn.",
        False)
    no_prompt: bool = flag(
        "{\"chosen\": input + output + eos, \"rejected\": ...} instead of a \"prompt\" key.",
        False)
    num_pairs: int = flag(
        "pairs drawn per turn (with replacement; 8 as in the original; the paper's agent data "
        "uses 4). Pairs whose two texts are identical are dropped.", 8)
    seed: int = flag("the draws' random seed (42, the original's).", 42)
    tokenizer: Optional[str] = flag(
        "the agent's tokenizer (path or hub id) whose eos token ends each response; default: "
        "the embedded tiny model's.", None)


def json_lines(records) -> bytes:
    """One ``json.dumps`` line per record with json's defaults (ASCII escapes), the bytes the
    original wrote -- not :mod:`sweet_rl.io`'s UTF-8 lines -- so the files compare equal."""
    return "".join(json.dumps(r) + "\n" for r in records).encode("ascii")


def pairs(opts: PairsOptions) -> str:
    """Draw the pairs (or SFT records), write them and the sidecar, print one line."""
    import random

    from sweet_rl.io import read_jsonl, write_bytes, write_sidecar
    from sweet_rl.models.hf_generation import eos_token_of
    from sweet_rl.stages.factory import resolve_model
    from sweet_rl.stepwise.pairs import pair_records, sft_record
    from sweet_rl.stepwise.ranking import parse_ranked

    samples = read_jsonl(opts.input_path, parse_ranked)
    eos = eos_token_of(resolve_model(opts.tokenizer))
    started = time.time()
    dropped = 0
    if opts.get_sft:
        out = [sft_record(sample, eos) for sample in samples]
    else:
        out, dropped = pair_records(samples, opts.num_pairs, random.Random(opts.seed), eos,
                                    opts.no_prompt)
    write_bytes(opts.output_path, json_lines(out))
    write_sidecar(opts.output_path, opts.flags(), "generate_random_pairs")
    kind = "SFT records" if opts.get_sft else "pairs"
    print(f"generate_random_pairs: {len(out)} {kind} from {len(samples)} turns "
          f"({dropped} identical-text pairs dropped), eos {eos!r}, in "
          f"{time.time() - started:.1f}s -> {opts.output_path}")
    return opts.output_path
