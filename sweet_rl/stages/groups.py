"""Option groups several stages share: each flag is written here once, with its help and default.

A stage's options inherit the groups it uses; simulate holds :class:`JudgeOptions` a second
time under ``--pick_*`` (:func:`sweet_rl.flags.group`). The groups of the dialogue stage
(agent, simulator, rollout, ...) are in :mod:`sweet_rl.stages.simulate_options`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sweet_rl.flags import Options, flag
from sweet_rl.stepwise.judges import CRITIC_TYPES
from sweet_rl.stepwise.spans import SCORE_TOKENS

BROWSERS = ("chromium", "firefox")


@dataclass(kw_only=True)
class ResumeOptions(Options):
    """Resuming: what happens to an output that exists already."""

    to_continue: bool = flag(
        "resume a killed run: the rows already written are kept (each is checked against the "
        "row this run would write there) and only the missing ones are made.", False)
    overwrite: bool = flag(
        "replace an existing output; the old file stays until the new one is complete "
        "(without this or --to_continue, an existing output stops the run).", False)


@dataclass(kw_only=True)
class ShardOptions(Options):
    """Sharding: one contiguous block of the rows per run (one node each)."""

    num_shards: int = flag(
        "cut the rows into this many contiguous blocks (shards), one run each, seeded as in "
        "the whole run; join the shard files with scripts/merge_shards.py (1: no sharding).", 1)
    shard_index: int = flag("the block this run writes (0-based, below --num_shards).", 0)

    def check(self) -> None:
        from sweet_rl.stages.sharding import check_shard_flags

        check_shard_flags(self.num_shards, self.shard_index)


@dataclass(kw_only=True)
class ChunkedRunOptions(ResumeOptions, ShardOptions):
    """Chunks: records are appended a chunk at a time (sample and rank)."""

    chunk_size: int = flag("records written per append (a killed run redoes at most this many).",
                           32)

    def check(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"--chunk_size must be at least 1, got {self.chunk_size}")


@dataclass(kw_only=True)
class SamplingOptions(Options):
    """Sampling: how the agent writes a reply."""

    temperature: float = flag("the agent's sampling temperature.", 1.0)
    max_new_tokens: int = flag(
        "the most tokens the agent writes in one reply (a dialogue turn, or one candidate).",
        1024)


@dataclass(kw_only=True)
class EngineOptions(Options):
    """Model engine: where and how the stage's model runs."""

    backend: str = flag("``hf`` (transformers) or ``vllm`` (a GPU, or vLLM's CPU build).", "hf",
                        choices=("hf", "vllm"))
    batch_size: int = flag("hf: rows per generate call, candidates per scoring pass.", 16)
    device: Optional[str] = flag(
        "where the hf model runs (default: cuda when available, else cpu).", None)
    dtype: str = flag(
        "the model's dtype (\"auto\": bf16 on a GPU that has it, fp32 on the CPU; with vllm on "
        "a GPU, vLLM's own choice).", "auto")
    seed: int = flag(
        "the run's seed: each record's sampling seed derives from it and the record's index "
        "among all records (so shards and resumed runs draw what one run draws); vLLM's "
        "engine seed.", 0)


@dataclass(kw_only=True)
class JudgeOptions(Options):
    """Step critic: what scores (or picks among) the candidate replies of a turn."""

    critic_type: str = flag(
        "``logprob`` (SWEET-RL: critic log-prob minus reference log-prob), ``regression`` or "
        "``value`` (a critic trained with ``train_dpo.py --critic_head regression|value``: "
        "the head's score of context + candidate), ``judge`` (LLM-as-a-Judge: --model_id "
        "compares the candidates two at a time given the reference and the dialogue, in "
        "process or at --judge_base_url), ``vlm_regression`` (the frontend's "
        "vision-language critic, ``train_dpo.py --critic_head vlm_regression``: the "
        "reference screenshot and context + candidate) or ``random`` (no critic). Every type "
        "writes one score per candidate, higher = better (sweet_rl/stepwise/judges.py).",
        "logprob", choices=CRITIC_TYPES)
    model_id: Optional[str] = flag(
        "the step critic: a checkpoint (path or hub id; ``tiny`` for the embedded tiny "
        "model), or for --critic_type judge the judging model (its served name with "
        "--judge_base_url); not used by --critic_type random.", None)
    no_use_ground_truth: bool = flag(
        "condition the critic on ``input`` instead of ``input_with_ground_truth`` (the "
        "paper's \"without training-time information\").", False)
    score_tokens: str = flag(
        "which tokens of the critic's text (context + candidate) its score averages over: "
        "``original`` (every token after the first, what the original's code did on vLLM "
        "0.6.5), ``turn`` (after the context's last end-of-turn token: assistant header + "
        "candidate, what the same code does on vLLM >= 0.8) or ``candidate`` (the candidate "
        "only, the paper's description).", "original", choices=SCORE_TOKENS)
    judge_base_url: Optional[str] = flag(
        "--critic_type judge: the OpenAI-compatible server serving --model_id (default: the "
        "judge runs in-process).", None)


@dataclass(kw_only=True)
class RenderOptions(Options):
    """Rendering: the offline browsers that shoot the pages."""

    browser: str = flag("``chromium`` or ``firefox``.", "chromium", choices=BROWSERS)
    pool_size: Optional[int] = flag(
        "browsers rendering at once (default: up to 4, one per core).", None)
    assets_dir: Optional[str] = flag(
        "the offline Tailwind cache (default: $SWEET_RL_ASSETS or ~/.cache/sweet_rl/assets).",
        None)
    page_load_timeout: float = flag(
        "seconds a page may take to load before it counts as failed.", 20.0)


@dataclass(kw_only=True)
class EvaluateOptions(Options):
    """Evaluation: the trajectory file scored in place, and the pairs built from it."""

    saved_path: str = flag(
        "the trajectories from simulate; ``reward`` is written back into the file.")
    k: int = flag("rollouts per task (simulate's --best_of_n), for best-of-k and pairs.", 1)
    preference_path: Optional[str] = flag(
        "write the critic's trajectory-level preference pairs here: ``input + output`` of the "
        "last agent turn, chosen vs rejected.", None)
    ground_truth_preference_path: Optional[str] = flag(
        "the same pairs, each side prefixed with the task's reference (solution or HTML): "
        "the SWEET-RL critic's training data.", None)
    reevaluate: bool = flag(
        "score again even rows that already carry a reward from the same settings.", False)

    def check(self) -> None:
        if self.k < 1:
            raise ValueError(f"--k must be at least 1, got {self.k}")
