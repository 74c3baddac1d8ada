"""Reading training files into tokenised examples (lists of dicts the collators take).

* Preference pairs: ``{"chosen", "rejected"}`` or ``{"prompt", "chosen", "rejected"}`` per
  line (critic pairs from evaluate, DPO pairs from pair); other key names by flag. A side is
  a string or, as in the original's frontend critic pairs, an ``{"input", "output"}`` object
  whose text is ``input + output``. A missing or mistyped field raises
  :class:`~sweet_rl.records.RecordError` with file, line and field (``chosen.output``...).
* Trajectories for rejection fine-tuning: rows whose ``reward`` is at least ``min_reward``;
  the text is the last assistant turn's ``input + output`` (the whole chat-formatted
  dialogue) plus the end-of-turn token -- the agent's raw output is decoded without it.

Reading and checking a file needs no tokenizer and imports no torch: the training stages read
their data first, so a bad line stops a run in a fraction of a second, before the seconds it
takes to import torch and transformers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, List, Optional

from sweet_rl.records import PreferencePair, RecordError, Trajectory

if TYPE_CHECKING:  # the collators import torch
    from sweet_rl.training.collators import SequenceTokenizer

logger = logging.getLogger(__name__)


def _pair_parser(chosen_key: str, rejected_key: str, prompt_key: Optional[str]):
    """PreferencePair.from_dict under other key names; errors name the file's own keys."""
    names = {"chosen": chosen_key, "rejected": rejected_key, "prompt": prompt_key or "prompt"}

    def parse(data):
        if not isinstance(data, dict):
            raise RecordError(f"expected an object, got {type(data).__name__}")
        renamed = {std: data[key] for std, key in names.items() if key in data}
        if not prompt_key:
            renamed.pop("prompt", None)
        try:
            return PreferencePair.from_dict(renamed)
        except RecordError as err:
            raise RecordError(err.message, field=_file_field(err.field, names)) from None

    return parse


def _file_field(field: Optional[str], names) -> Optional[str]:
    """``rejected.output`` -> ``<rejected_key>.output``: errors name the file's own keys."""
    if not field:
        return field
    head, dot, rest = field.partition(".")
    return names.get(head, head) + dot + rest


def read_preference_pairs(path: str, chosen_key: str = "chosen", rejected_key: str = "rejected",
                          prompt_key: Optional[str] = "prompt") -> List[PreferencePair]:
    from sweet_rl.io import read_jsonl

    pairs = read_jsonl(path, _pair_parser(chosen_key, rejected_key, prompt_key))
    if not pairs:
        raise RecordError("no preference pairs", path=path)
    return pairs


def tokenize_pairs(pairs: List[PreferencePair], seq: SequenceTokenizer) -> List[dict]:
    """``[{"chosen": Tokenized, "rejected": Tokenized}, ...]``; warns about pairs that train
    on no token, fails when no pair has any (a wrong ``response_template``)."""
    from tqdm import tqdm

    examples, empty = [], 0
    for pair in tqdm(pairs, desc="tokenising pairs", disable=len(pairs) < 1000):
        chosen, rejected = seq.pair(pair.chosen, pair.rejected, pair.prompt)
        empty += chosen.num_loss_tokens == 0 or rejected.num_loss_tokens == 0
        examples.append({"chosen": chosen, "rejected": rejected})
    if empty == len(examples):
        raise ValueError("no pair has a token to train on; check --response_template")
    if empty:
        logger.warning("%d of %d pairs have a side with no trained token", empty, len(examples))
    if seq.lost_responses:
        logger.warning("%d sequences lost the start of their final response to max_len",
                       seq.lost_responses)
    return examples


def _check_sft_turn(trajectory: Trajectory) -> None:
    turns = trajectory.assistant_turns
    if not turns or turns[-1].input is None or turns[-1].output is None:
        raise RecordError("the last assistant turn needs 'input' and 'output'",
                          field="dialogue_history")


def sft_text(trajectory: Trajectory, eos_token: str) -> str:
    """The last assistant turn's prompt and generation, ended with the end-of-turn token."""
    _check_sft_turn(trajectory)
    last = trajectory.assistant_turns[-1]
    text = last.input + last.output
    return text if text.endswith(eos_token) else text + eos_token


def read_sft_trajectories(path: str, min_reward: float = 1.0) -> List[Trajectory]:
    """The rows with ``reward >= min_reward``, each checked (a reward, a last assistant turn
    with its ``input`` and ``output``); no tokenizer needed."""
    from sweet_rl.io import iter_jsonl

    kept, total = [], 0
    for number, trajectory in enumerate(iter_jsonl(path, Trajectory.from_dict), start=1):
        total += 1
        if trajectory.reward is None:
            raise RecordError("missing (run the evaluate stage first)", field="reward",
                              path=path, line=number)
        if trajectory.reward < min_reward:
            continue
        try:
            _check_sft_turn(trajectory)
        except RecordError as err:
            raise err.located(path, number) from None
        kept.append(trajectory)
    logger.info("%d of %d trajectories have reward >= %s", len(kept), total, min_reward)
    if not kept:
        raise RecordError(f"no trajectory with reward >= {min_reward}", path=path)
    return kept


def tokenize_sft(trajectories: List[Trajectory], seq: SequenceTokenizer) -> List[dict]:
    """``[{"sequence": Tokenized}, ...]``, one per trajectory, in order."""
    eos = seq.tokenizer.eos_token
    return [{"sequence": seq.single(sft_text(trajectory, eos))} for trajectory in trajectories]


def read_sft_examples(path: str, seq: SequenceTokenizer, min_reward: float = 1.0) -> List[dict]:
    """``[{"sequence": Tokenized}, ...]`` for the rows with ``reward >= min_reward``."""
    return tokenize_sft(read_sft_trajectories(path, min_reward), seq)
