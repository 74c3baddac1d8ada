"""Stage: the critic scores every sampled candidate; adds ``judge_result[N]`` to each step record.

See :mod:`sweet_rl.stepwise.ranking` for the arithmetic, :mod:`sweet_rl.stepwise.spans` for
which tokens ``--score_tokens`` averages over, and :mod:`sweet_rl.stepwise.scoring` for the
shared-prompt KV cache. Records are appended chunk by chunk (:mod:`sweet_rl.stages.chunked`);
``--to_continue`` resumes a killed run after the records already written. ``--num_shards N
--shard_index I`` scores one contiguous block of the input records (one node each);
scripts/merge_shards.py joins the shard files into the file a single run writes (scoring is
deterministic, no record depends on another).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import flag
from sweet_rl.stages.chunked import ChunkedStage, run_chunked
from sweet_rl.stages.groups import ChunkedRunOptions, EngineOptions, JudgeOptions


@dataclass(kw_only=True)
class RankOptions(JudgeOptions, EngineOptions, ChunkedRunOptions):
    """Score each candidate with the critic: judge_result = critic log-prob - reference log-prob
    (``--critic_type logprob``, SWEET-RL's), or the score of another step critic.

    Example (tiny model as the critic, on the CPU):
        python scripts/rank_best_of_n.py --model_id outputs/tiny-llama \\
            --input_path outputs/sampled.jsonl --output_path outputs/ranked.jsonl

    The two paths may also be given by position, in the original's order (as
    sample_best_of_n.py takes them):
        python scripts/rank_best_of_n.py outputs/sampled.jsonl outputs/ranked.jsonl \\
            --model_id outputs/tiny-llama
    """

    POSITIONAL = ("input_path", "output_path", "model_id", "no_use_ground_truth", "use_sum",
                  "save_steps")
    input_path: str = flag("the sample stage's step records.")
    output_path: str = flag(
        "the same records, each with ``judge_result`` (one score per candidate).")
    use_sum: bool = flag(
        "compare summed log-probs instead of per-token means (the paper's ablation); the "
        "critic's sum runs over the same tokens as its mean.", False)
    save_steps: Optional[int] = flag(
        "the original's name for --chunk_size (records per write); wins when given.", None)
    no_prompt_cache: bool = flag(
        "hf only: score every candidate with its full prompt instead of reusing the turn's "
        "prompt KV cache (slower; same numbers up to rounding).", False)
    api_key: Optional[str] = flag(
        "the judge server's key (default: $OPENAI_API_KEY, else EMPTY). Never written to "
        "disk.", None, secret=True)
    screenshots_from: Optional[str] = flag(
        "--critic_type vlm_regression: the evaluated frontend trajectory file the step "
        "records were sampled from; each turn is scored with its task's reference screenshot "
        "recorded there.", None)

    def check(self) -> None:
        if not self.input_path or not self.output_path:
            raise ValueError("INPUT_PATH and OUTPUT_PATH must not be empty (give them by "
                             "position or as --input_path / --output_path)")
        if self.save_steps is not None and self.save_steps < 1:
            raise ValueError(f"--save_steps must be at least 1, got {self.save_steps}")
        if not self.model_id and self.critic_type != "random":
            # never rank with a random tiny critic by accident
            raise ValueError("--model_id is required: the trained critic (path or hub id; "
                             "tiny for the embedded tiny model)")


class Ranking(ChunkedStage):
    """Step records with candidates in, the same records with ``judge_result`` out."""

    name = "rank_best_of_n"

    def __init__(self, opts: RankOptions):
        super().__init__(opts)
        self.scored = 0  # candidates scored by this run
        if opts.save_steps is not None:  # the original's name for the chunk size
            self.chunk_size = opts.save_steps

    def read(self):
        from sweet_rl.io import read_jsonl
        from sweet_rl.stepwise.ranking import parse_step

        return read_jsonl(self.opts.input_path, parse_step)

    def key(self, record):
        from sweet_rl.stepwise.turns import dumps_key

        return dumps_key(record.input, record.additional_outputs)

    def open(self):
        from sweet_rl.stages.factory import build_judge

        opts = self.opts
        return build_judge(opts, opts, use_sum=opts.use_sum,
                           prompt_cache=not opts.no_prompt_cache,
                           api_key=opts.api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
                           screenshots_from=opts.screenshots_from)

    def process(self, worker, chunk, first):
        from sweet_rl.stepwise.ranking import ranked

        judged = worker.judge(chunk)  # vLLM: one engine call for the whole chunk
        self.scored += sum(len(s.additional_outputs) for s in chunk)
        return [ranked(s, j) for s, j in zip(chunk, judged)]

    def summary(self, path, seconds):
        return (f"{summarize(path)}; scored {self.scored} candidates in {seconds:.1f}s "
                f"({self.scored / max(seconds, 1e-9):.1f}/s)")


def rank(opts: RankOptions) -> str:
    """Score every candidate (resumable, shardable); returns the output path."""
    return run_chunked(Ranking(opts))


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
