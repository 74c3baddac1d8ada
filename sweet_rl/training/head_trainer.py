"""Training the scalar-head critics (:mod:`sweet_rl.training.heads`) with the Trainer.

* ``regression`` (SWEET-RL, Zhou et al. 2025, Table 3, "w/ Regression Head"): batches from
  :class:`~sweet_rl.training.masks.PreferenceCollator` (B chosen rows, then B rejected rows,
  the critic pairs tokenised as for the log-prob critic); loss
  :func:`~sweet_rl.training.losses.bradley_terry_loss` of the two scores.
* ``value`` (Figure 3a, "w/ Value Function"): one row per assistant turn of an evaluated
  trajectory file -- the ground-truth prefix + that turn's ``input`` (its chat-formatted
  prompt) + ``output`` (its raw generation), which is exactly what a candidate is scored on
  at ranking time -- labelled 1 when the trajectory's reward is at least 1.0 (success);
  loss :func:`~sweet_rl.training.losses.value_loss` of the success logit.

Every token of a row is pooled, so the loss masks and turn ids of the tokenised sequences do
not matter here; only their (left-truncated) ids do.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Tuple

import torch

from sweet_rl.training.heads import ScalarHeadModel, load_backbone, save_head_files
from sweet_rl.training.losses import bradley_terry_loss, value_loss
from sweet_rl.training.masks import SequenceTokenizer, pad_batch
from sweet_rl.training.options import TrainingOptions
from sweet_rl.training.trainer import PreferenceTrainer

logger = logging.getLogger(__name__)

SUCCESS_REWARD = 1.0  # a backend trajectory passes every test; a frontend one matches exactly

# one trajectory: the texts of its assistant turns and the label they all share
ValueRow = Tuple[List[str], float]


def read_value_rows(path: str) -> List[ValueRow]:
    """One ``(texts, label)`` per trajectory of an evaluated file, in file order (the hold-out
    then keeps whole trajectories out). Errors name the file, the line and the field."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import RecordError, Trajectory
    from sweet_rl.types import GROUND_TRUTH_PREFIX

    rows: List[ValueRow] = []
    for number, trajectory in enumerate(iter_jsonl(path, Trajectory.from_dict), start=1):
        if trajectory.reward is None:
            raise RecordError("missing (run the evaluate stage first)", field="reward",
                              path=path, line=number)
        prefix = GROUND_TRUTH_PREFIX.format(ground_truth=trajectory.task.ground_truth)
        texts = []
        for index, turn in enumerate(trajectory.dialogue_history):
            if turn.role != "assistant":
                continue
            for key in ("input", "output"):
                if getattr(turn, key) is None:
                    raise RecordError("missing: a value row needs the turn's prompt and "
                                      "generation", field=f"dialogue_history[{index}].{key}",
                                      path=path, line=number)
            texts.append(prefix + turn.input + turn.output)
        if not texts:
            raise RecordError("no assistant turn", field="dialogue_history", path=path,
                              line=number)
        rows.append((texts, 1.0 if trajectory.reward >= SUCCESS_REWARD else 0.0))
    if not rows:
        raise RecordError("no trajectories", path=path)
    return rows


def tokenize_value_rows(rows: List[ValueRow], seq: SequenceTokenizer) -> List[dict]:
    """``[{"sequence": Tokenized, "success": 0.0 | 1.0}, ...]``, one per assistant turn."""
    examples = [{"sequence": seq.single(text), "success": label}
                for texts, label in rows for text in texts]
    successes = sum(1 for _, label in rows if label)
    logger.info("%d value rows from %d trajectories, %d of them successful", len(examples),
                len(rows), successes)
    if successes in (0, len(rows)):
        logger.warning("every trajectory has the same outcome: the value head can only learn "
                       "a constant")
    return examples


class ValueCollator:
    """Right-pads value rows: ``input_ids``, ``attention_mask`` (N, T) and ``success`` (N,).

    Not called ``labels``: the Trainer would count them as tokens of a language-model loss.
    """

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, examples: List[dict]) -> Dict[str, torch.Tensor]:
        batch = pad_batch([e["sequence"] for e in examples], self.pad_id)
        success = torch.tensor([e["success"] for e in examples], dtype=torch.float32)  # (N,)
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
                "success": success}


class ScalarHeadTrainer(PreferenceTrainer):
    """The regression or value loss on a :class:`~sweet_rl.training.heads.ScalarHeadModel`.

    Reuses :class:`PreferenceTrainer`'s metric averaging (``log``). Its ``_save`` adds the
    config and ``critic_head.json`` to the weights the stock Trainer writes: for a plain
    ``nn.Module`` that is its full state dict, gathered from every rank under ZeRO-3, the
    head included.
    """

    def __init__(self, *args, kind: str, max_len: Optional[int] = None, **kwargs):
        super().__init__(*args, **kwargs)
        if kind not in ("regression", "value"):
            raise ValueError(f"no scalar head of kind {kind!r}")
        self.kind, self.max_len = kind, max_len

    def compute_loss(self, model, inputs: Dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch=None):
        scores = model(input_ids=inputs["input_ids"],
                       attention_mask=inputs["attention_mask"])  # (N,)
        if self.kind == "regression":
            b = scores.shape[0] // 2
            chosen, rejected = scores[:b], scores[b:]  # (B,) each
            loss = bradley_terry_loss(chosen, rejected).mean()
            metrics = {"bt_loss": loss, "accuracy": (chosen > rejected).float().mean(),
                       "chosen_reward": chosen.mean(), "rejected_reward": rejected.mean(),
                       "margin": (chosen - rejected).mean()}
            outputs = {"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach()}
        else:
            labels = inputs["success"].to(scores.dtype)  # (N,)
            loss = value_loss(scores, labels).mean()
            metrics = {"value_loss": loss, "accuracy": ((scores > 0).float() == labels).float()
                       .mean(), "mean_logit": scores.mean(), "success_rate": labels.mean()}
            outputs = {"logits": scores.detach()}
        if model.training:
            for name, value in metrics.items():
                self._stored[name].append(value.detach().float().item())
        return (loss, outputs) if return_outputs else loss

    def _save(self, output_dir: Optional[str] = None, state_dict=None) -> None:
        super()._save(output_dir, state_dict=state_dict)
        if self.args.should_save:
            model = self.accelerator.unwrap_model(self.model)
            save_head_files(model, output_dir or self.args.output_dir, self.kind, self.max_len)


def load_for_training(path: str, options: TrainingOptions, use_deepspeed: bool):
    """The agent's backbone with a new head seeded by ``--seed``. As for the log-prob critic,
    under DeepSpeed with bf16 the weights load in bf16 (DeepSpeed keeps fp32 master copies),
    otherwise in fp32 with the Trainer's bf16 autocast."""
    from sweet_rl.training.config import attention_implementation

    dtype = torch.bfloat16 if options.bf16 and use_deepspeed else torch.float32
    backbone = load_backbone(path, dtype, attention_implementation(options.flash_attn))
    return ScalarHeadModel(backbone, seed=options.seed)
