"""Training the scalar-head critics (:mod:`sweet_rl.training.heads`) with the Trainer.

* ``regression`` (SWEET-RL, Zhou et al. 2025, Table 3, "w/ Regression Head"): batches from
  :class:`~sweet_rl.training.collators.PreferenceCollator` (B chosen rows, then B rejected rows,
  the critic pairs tokenised as for the log-prob critic); loss
  :func:`~sweet_rl.training.losses.bradley_terry_loss` of the two scores.
* ``value`` (Figure 3a, "w/ Value Function"): one row per assistant turn of an evaluated
  trajectory file -- the ground-truth prefix + that turn's ``input`` (its chat-formatted
  prompt) + ``output`` (its raw generation), which is exactly what a candidate is scored on
  at ranking time -- labelled 1 when the trajectory's reward is at least 1.0 (success);
  loss :func:`~sweet_rl.training.losses.value_loss` of the success logit.

* ``vlm_regression`` (the paper's frontend critic, :mod:`sweet_rl.training.vlm_heads`): VLM
  critic pairs, encoded (pictures included) when the Trainer asks for them
  (:class:`VLMPairDataset`), batched B chosen rows then B rejected rows; the same
  Bradley-Terry loss.

Every token of a row is pooled, so the loss masks and turn ids of the tokenised sequences do
not matter here; only their (left-truncated) ids do.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Tuple

import torch

from sweet_rl.training.collators import SequenceTokenizer, pad_batch
from sweet_rl.training.heads import ScalarHeadModel, load_backbone, save_head_files
from sweet_rl.training.losses import bradley_terry_loss, value_loss
from sweet_rl.training.options import TrainingOptions
from sweet_rl.training.trainer import PreferenceTrainer
from sweet_rl.training.vlm_heads import KIND as VLM_KIND
from sweet_rl.training.vlm_heads import VLMHeadModel

logger = logging.getLogger(__name__)

# what a head model's forward takes from a batch
MODEL_INPUTS = ("input_ids", "attention_mask", "pixel_values", "image_grid_thw",
                "mm_token_type_ids")
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


class VLMPairDataset(torch.utils.data.Dataset):
    """VLM critic pairs, each encoded when the Trainer asks for it: a data set's pixels do not
    fit in memory at once (a 7B critic's page is some 1000 image tokens of 1176 floats each)."""

    def __init__(self, pairs, encoder):
        self.pairs, self.encoder = pairs, encoder

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> dict:
        (image, chosen), (other, rejected) = self.pairs[index]
        frame = self.encoder.frame(image)
        # the two sides of a pair show the same reference page: its pixels once
        other_frame = frame if other == image else self.encoder.frame(other)
        return {"chosen": self.encoder.join(frame, chosen),
                "rejected": self.encoder.join(other_frame, rejected)}


class VLMPairCollator:
    """B pairs -> one batch of B chosen rows then B rejected rows (:func:`vlm_batch`)."""

    def __init__(self, pad_id: int, image_token_id: int):
        self.pad_id, self.image_token_id = pad_id, image_token_id

    def __call__(self, examples: List[dict]) -> Dict[str, torch.Tensor]:
        from sweet_rl.training.vlm_heads import vlm_batch

        rows = [e["chosen"] for e in examples] + [e["rejected"] for e in examples]
        return vlm_batch(rows, self.pad_id, self.image_token_id)


class ScalarHeadTrainer(PreferenceTrainer):
    """The regression or value loss on a :class:`~sweet_rl.training.heads.ScalarHeadModel`
    (the Bradley-Terry loss on a :class:`~sweet_rl.training.vlm_heads.VLMHeadModel` too).

    Reuses :class:`PreferenceTrainer`'s metric averaging (``log``). Its ``_save`` adds the
    config and ``critic_head.json`` to the weights the stock Trainer writes: for a plain
    ``nn.Module`` that is its full state dict, gathered from every rank under ZeRO-3, the
    head included (a VLM head's under Qwen2-VL's checkpoint names, which AutoModel reads).
    """

    def __init__(self, *args, kind: str, max_len: Optional[int] = None,
                 head_info: Optional[dict] = None, **kwargs):
        super().__init__(*args, **kwargs)
        if kind not in ("regression", "value", VLM_KIND):
            raise ValueError(f"no scalar head of kind {kind!r}")
        self.kind, self.max_len, self.head_info = kind, max_len, head_info

    def compute_loss(self, model, inputs: Dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch=None):
        # the rows' ids and mask; VLM rows add their pictures (turn ids, labels: not inputs)
        scores = model(**{k: v for k, v in inputs.items() if k in MODEL_INPUTS})  # (N,)
        if self.kind in ("regression", VLM_KIND):
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
        model = self.accelerator.unwrap_model(self.model)
        if self.args.should_save and isinstance(model, VLMHeadModel):
            state = state_dict if state_dict is not None else model.state_dict()
            state_dict = model.checkpoint_state(state)  # names AutoModel reads back
        super()._save(output_dir, state_dict=state_dict)
        if self.args.should_save:
            save_head_files(model, output_dir or self.args.output_dir, self.kind, self.max_len,
                            self.head_info)


def load_for_training(path: str, options: TrainingOptions, use_deepspeed: bool,
                      kind: str = "regression"):
    """The backbone at ``path`` (the agent's; a Qwen2-VL for ``vlm_regression``) with a new
    head seeded by ``--seed``. As for the log-prob critic, under DeepSpeed with bf16 the
    weights load in bf16 (DeepSpeed keeps fp32 master copies), otherwise in fp32 with the
    Trainer's bf16 autocast."""
    from sweet_rl.training.config import attention_implementation

    dtype = torch.bfloat16 if options.bf16 and use_deepspeed else torch.float32
    backbone = load_backbone(path, dtype, attention_implementation(options.flash_attn))
    model_class = VLMHeadModel if kind == VLM_KIND else ScalarHeadModel
    return model_class(backbone, seed=options.seed)
