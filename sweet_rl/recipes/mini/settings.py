"""The miniature recipes' settings: one dataclass field per knob, with its default and its help.

Each field is also an environment variable of the same name in capitals (``SEEDS="0 1"``,
``BON_NS=1,4``, ``JOBS=2``): the shell recipes (``scripts/run_mini_reproduction.sh``,
``scripts/run_mini_quick.sh``, ``scripts/build_mini_agent.sh``) only run these commands, so
the knobs they document keep working. A flag on the command line wins over the environment;
list knobs take commas or spaces. :func:`from_environment` is the one place that maps them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Type, TypeVar

from sweet_rl.flags import Options, flag

# the methods trained after the zero-shot evaluation, in the paper's Table 2
METHODS = ("rft", "multiturn_dpo", "sweet", "sweet_no_gt", "sweet_sum")
# the Best-of-N curve's other choosers (paper Figure 3a)
EXTRA_CRITICS = ("regression", "value", "judge")


def _positive(value: Optional[int], name: str) -> None:
    if value is not None and value < 1:
        raise ValueError(f"--{name} ({name.upper()}) must be a positive number, got {value}")


@dataclass(kw_only=True)
class ScheduleSettings(Options):
    """How the stages run: side by side, each with its torch threads, on one device."""

    jobs: Optional[int] = flag(
        "stage commands at once (default: one per core). Stages that do not need each other's "
        "files run side by side; the numbers never depend on it.", None)
    threads: int = flag("torch threads per stage command; the numbers depend on it.", 1)
    device: str = flag(
        "cpu or cuda for every stage (empty: a GPU when one is visible). cpu hides the GPUs "
        "from every stage, the trainings included; cuda stops at once when there is none.",
        "")
    python: str = flag("the Python interpreter that runs each stage command.", sys.executable)
    preload: bool = flag(
        "start the stage commands from one process of PYTHON that has imported torch and "
        "transformers once (a fork per command, on Linux; DEVICE=cuda stages always start "
        "fresh); off: a fresh interpreter per command. The numbers do not depend on it.", True)
    logs: Optional[str] = flag("the folder of every step's log (default: OUT/logs).", None)
    micro: int = flag(
        "rows per forward pass in every training (the batch accumulated: the same update up "
        "to float rounding, without the padding).", 1)
    test_tasks: int = flag("held-out tasks generated and evaluated on.", 40)

    def check(self) -> None:
        if self.device not in ("", "cpu", "cuda"):
            raise ValueError("--device (DEVICE) must be cpu or cuda (empty: a GPU when there "
                             f"is one), got {self.device!r}")
        _positive(self.jobs, "jobs")
        _positive(self.threads, "threads")
        _positive(self.micro, "micro")

    def slots(self) -> int:
        return self.jobs or os.cpu_count() or 1


@dataclass(kw_only=True)
class WarmSettings(Options):
    """The warm-started agent: its data, its base model and its SFT."""

    train_tasks: int = flag("train tasks generated (one scripted dialogue each).", 245)
    family: str = flag(
        "the task family set: basic (the four families of tasks.py: the negative control) or "
        "followup (followup_tasks.py: a detail only a follow-up question reveals).", "basic")
    mix: Optional[str] = flag(
        "shares of the scripted styles in the SFT dialogues (name=share,...; default: the "
        "family's, FAMILY_SETS in family_sets.py).", None)
    valid_tasks: int = flag("validation tasks written beside the others (followup only).", 0)
    hidden: int = flag("the base model's hidden size.", 128)
    layers: int = flag("the base model's number of layers.", 2)
    tie: bool = flag("tie the base model's input and output embeddings.", True)
    drills: int = flag("recall drills trained on beside the dialogues.", 2000)
    epochs: int = flag("SFT epochs on the dialogues and drills together.", 8)
    lr: float = flag("the warm start's SFT learning rate.", 3e-3)
    batch: int = flag("the warm start's SFT batch size.", 8)
    drill_epochs: int = flag("SFT epochs on the recall drills alone first (0: none).", 0)
    seed: int = flag("seed of the warm start's tasks, dialogues, base model and SFT.", 0)
    families: Optional[List[str]] = flag(
        "only these task families (e.g. late_fee; default: all four).", None)
    agent_prompt: str = flag(
        "the agent's system message: auto (bundled), mini (the short one), or a path.", "auto")
    tries: int = flag("SFT runs (other data orders) until the agent copies told details.", 4)
    first_try: int = flag(
        "the first SFT try (training seed seed + 1000 * first_try); the tries before it are not "
        "trained (on a machine whose float kernels keep the first from copying).", 0)
    tries_at_once: Optional[int] = flag(
        "SFT runs trained side by side (default: JOBS, so a failed copy costs no extra time; "
        "1: one after another, no training beyond the first that copies).", None)
    copy_min: float = flag(
        "share of told train dialogues the agent must answer right (0: no check, one SFT).",
        0.8)

    def check(self) -> None:
        from sweet_rl.recipes.mini.family_sets import family_set
        from sweet_rl.recipes.mini.styles import parse_mix

        _positive(self.tries, "tries")
        _positive(self.tries_at_once, "tries_at_once")
        if not 0 <= self.first_try < self.tries:
            raise ValueError(f"--first_try (FIRST_TRY) is {self.first_try}: it must be at least 0 "
                             f"and below --tries (TRIES, {self.tries})")
        parse_mix(self.shares(), family_set(self.family).styles)

    def shares(self) -> str:
        """The mix asked for, or the family's."""
        from sweet_rl.recipes.mini.family_sets import family_set

        return self.mix or family_set(self.family).mix

    def max_turns(self) -> int:
        """Agent turns per dialogue of the family (every simulation's --max_steps)."""
        from sweet_rl.recipes.mini.family_sets import family_set

        return family_set(self.family).max_turns


@dataclass(kw_only=True)
class BuildSettings(ScheduleSettings, WarmSettings):
    """Build the miniature's warm agent (OUT/agent), then measure its zero-shot success."""

    out: str = flag("the warm agent's folder.", "outputs/mini")
    measure: bool = flag("evaluate the agent on the held-out tasks at the end.", True)
    max_new_tokens: int = flag("tokens per agent reply in the measurement.", 256)


@dataclass(kw_only=True)
class RunSettings(ScheduleSettings, WarmSettings):
    """Every method of Table 2 from one warm agent, over seeds; then the table."""

    out: str = flag("the run's folder (seed<N>/, logs/, table.md).", "outputs/mini_repro")
    warm: Optional[str] = flag(
        "the warm agent's folder, built with the warm settings when it has no agent/ "
        "(default: OUT/warm).", None)
    seeds: List[int] = flag("the seeds, each a full run of every method.", [0, 1, 2])
    methods: List[str] = flag(f"methods trained after zero-shot: {', '.join(METHODS)}.",
                              list(METHODS))
    offline_tasks: int = flag("train tasks the offline data is collected on.", 120)
    offline_from: Optional[str] = flag(
        "a trajectory file in simulate's layout (K rollouts per task), used as every seed's "
        "offline data instead of collecting it with the warm agent.", None)
    k: int = flag("rollouts per task in the offline data.", 3)
    eval_rollouts: int = flag("dialogues per held-out task at temperature 1.0.", 3)
    num_samples: int = flag("candidates per turn for the critic to rank.", 8)
    data_fraction: float = flag("share of the offline trajectories sampled per turn.", 0.5)
    num_pairs: int = flag("per-turn pairs drawn from each ranked turn.", 2)
    score_tokens: str = flag("the critic's scored span (the candidate's tokens only: the "
                             "paper's description).", "candidate")
    max_new_tokens: int = flag("tokens per agent reply.", 192)
    critic_lr: float = flag("the critics' learning rate.", 1e-3)
    agent_lr: float = flag("multi-turn DPO's and SWEET-RL's agent DPO learning rate.", 1e-4)
    sft_lr: float = flag("rejection fine-tuning's learning rate.", 1e-3)
    traj_epochs: int = flag("epochs of the critics and multi-turn DPO (trajectory pairs).", 4)
    agent_epochs: int = flag("epochs of SWEET-RL's per-turn agent DPO.", 1)
    sft_epochs: int = flag("epochs of rejection fine-tuning.", 2)
    bon_ns: List[int] = flag("the Best-of-N curve's N (first seed only; empty: no curve).",
                             [1, 2, 4, 8, 16])
    bon_rollouts: int = flag("dialogues per held-out task at each point of the curve.", 1)
    bon_critics: List[str] = flag(
        "more curves: regression (Table 3's head), value (Figure 3a's value function), judge "
        "(LLM-as-a-Judge: the warm agent).", list(EXTRA_CRITICS))
    split: str = flag("the split every evaluation runs on: test, or valid (followup with "
                      "VALID_TASKS: settings are chosen there, never on the test tasks).",
                      "test")
    fractions: List[str] = flag(
        "the data-scaling sweep (paper Figure 3b): multi-turn DPO and SWEET-RL also trained "
        "on the first FRACTIONS of the offline tasks (e.g. 1/3,2/3; nested parts, the same "
        "candidates ranked); empty: no sweep.", [])
    match_steps: bool = flag(
        "train rejection fine-tuning and multi-turn DPO for as many updates as SWEET-RL's "
        "agent DPO on the same offline data (instead of SFT_EPOCHS and TRAJ_EPOCHS): the "
        "methods compared at matched gradient steps.", False)
    sample_shards: Optional[int] = flag(
        "pieces the candidates are sampled in, side by side (default: JOBS; merged byte for "
        "byte: the numbers do not depend on it).", None)

    def check(self) -> None:
        for method in self.methods:
            if method not in METHODS:
                raise ValueError(f"unknown method {method!r} in --methods (METHODS); choose "
                                 f"from {' '.join(METHODS)}")
        for kind in self.bon_critics:
            if kind not in EXTRA_CRITICS:
                raise ValueError(f"unknown entry {kind!r} in --bon_critics (BON_CRITICS); "
                                 f"choose from {' '.join(EXTRA_CRITICS)}")
        if not self.seeds:
            raise ValueError("--seeds (SEEDS) is empty: give at least one seed")
        if self.split not in ("test", "valid"):
            raise ValueError(f"--split (SPLIT) must be test or valid, got {self.split!r}")
        if self.split == "valid" and not (self.family == "followup" and self.valid_tasks):
            raise ValueError("--split valid needs --family followup and --valid_tasks above 0")
        if self.match_steps and "sweet" not in self.methods:
            raise ValueError("--match_steps (MATCH_STEPS) matches SWEET-RL's updates: "
                             "--methods needs sweet")
        from sweet_rl.recipes.mini.subset import parse_fraction

        for text in self.fractions:
            parse_fraction(text)
        _positive(self.sample_shards, "sample_shards")


# The quick miniature (``sweet-rl mini quick``, scripts/run_mini_quick.sh): the reproduction on
# one task family with the short prompt and a curriculum warm start, a 2-core CPU's minutes
# (docs/mini_reproduction.md, "The quick miniature"); every other setting is the run's.
QUICK = {"out": "outputs/mini_quick", "families": "late_fee", "agent_prompt": "mini",
         "train_tasks": "135", "test_tasks": "33", "drills": "2000", "drill_epochs": "5",
         "epochs": "3", "offline_tasks": "120", "agent_lr": "3e-5", "bon_critics": ""}

T = TypeVar("T", bound=Options)


def from_environment(cls: Type[T], args: Sequence[str], environ: Mapping[str, str],
                     preset: Optional[Dict[str, str]] = None) -> T:
    """``cls`` from the command line over the environment (each field's name in capitals)
    over ``preset`` over the defaults; a bad value names its variable."""
    from sweet_rl.flags import flag_table
    from sweet_rl.flags.parse import build, read_command_line
    from sweet_rl.flags.spec import parse_text

    values = {}
    texts = dict(preset or {})
    texts.update({spec.name: environ[spec.name.upper()] for spec in flag_table(cls)
                  if spec.name.upper() in environ})
    for spec in flag_table(cls):
        if spec.name in texts:
            text = texts[spec.name]
            if spec.kind.many:
                text = ",".join(text.replace(",", " ").split())
            try:
                empty = not text and spec.kind.optional and not spec.kind.many
                values[spec.name] = None if empty else parse_text(spec, text)
            except ValueError as err:
                raise ValueError(f"{spec.name.upper()}: {err}") from None
    given, config = read_command_line(cls, args)
    values.update(given)
    return build(cls, values, config)
