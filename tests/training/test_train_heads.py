"""Scalar-head critics trained end to end on the tiny model, through train_dpo.py's main
(--critic_head regression / value), saved, and loaded back by load_scalar_critic."""

import json
import os

import pytest

from sweet_rl.records import RecordError
from sweet_rl.training.heads import ScalarCritic, load_scalar_critic
from sweet_rl.types import GROUND_TRUTH_PREFIX
from tests.training.helpers import critic_pairs, trajectories, write_jsonl

FAST = dict(learning_rate=1e-3, train_batch_size=2, micro_train_batch_size=1, max_len=256,
            lr_warmup_ratio=0.0, seed=0)


def read_metrics(save_path):
    with open(os.path.join(save_path, "metrics.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture
def trained_models(monkeypatch):
    """The model object each run held when it finished training, before saving."""
    from sweet_rl.training import run

    models = []
    finish = run._finish

    def keep(trainer, *args, **kwargs):
        models.append(trainer.model)
        return finish(trainer, *args, **kwargs)

    monkeypatch.setattr(run, "_finish", keep)
    return models


def pair_texts(path):
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    return [r["chosen"] for r in rows], [r["rejected"] for r in rows]


def margin(critic, chosen, rejected):
    scores_c, scores_r = critic.score(chosen), critic.score(rejected)
    return sum(c - r for c, r in zip(scores_c, scores_r)) / len(chosen)


def test_regression_head_learns_the_pairs_saves_and_reloads(tiny_model_dir, tmp_path,
                                                            trained_models, capsys):
    from safetensors import safe_open
    from transformers import AutoTokenizer

    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.training.heads import ScalarHeadModel, load_backbone

    pairs = critic_pairs(tmp_path / "critic.jsonl")
    save_path = str(tmp_path / "regression")
    train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=pairs, save_path=save_path,
                                critic_head="regression",
                                max_epochs=3, **FAST))

    metrics = read_metrics(save_path)
    assert len(metrics) == 6  # 4 pairs x 3 epochs / 2 pairs per step
    assert {"loss", "bt_loss", "accuracy", "chosen_reward", "rejected_reward", "margin"} <= set(
        metrics[0])
    assert metrics[-1]["accuracy"] == 1.0 and metrics[-1]["loss"] < metrics[0]["loss"]
    summary = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("train_dpo:"))
    assert "examples=4 steps=6 " in summary and summary.endswith("critic_head=regression")
    with open(os.path.join(save_path, "training.config.json"), encoding="utf-8") as handle:
        assert json.load(handle)["stages"]["train_dpo"]["critic_head"] == "regression"

    # the saved files: the backbone under the causal LM's names, the head, no lm_head
    with open(os.path.join(save_path, "critic_head.json"), encoding="utf-8") as handle:
        assert json.load(handle) == {"kind": "regression", "pooling": "mean", "max_len": 256}
    with safe_open(os.path.join(save_path, "model.safetensors"), framework="pt") as handle:
        keys = set(handle.keys())
        assert handle.get_slice("score_head.weight").get_shape() == [1, 64]
    assert "score_head.bias" in keys and "model.embed_tokens.weight" in keys
    assert not any(key.startswith("lm_head") for key in keys)

    # reloaded: the scores the model had in memory when training ended
    chosen, rejected = pair_texts(pairs)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    in_memory = ScalarCritic(trained_models[-1], tokenizer, "regression", max_len=256)
    loaded = load_scalar_critic(save_path, device="cpu")
    assert loaded.kind == "regression" and loaded.tokenizer.pad_token_id is not None
    texts = chosen + rejected
    assert loaded.score(texts, batch_size=3) == pytest.approx(in_memory.score(texts), abs=1e-5)

    # training widened the chosen-minus-rejected margin of the head it started from
    start = ScalarCritic(ScalarHeadModel(load_backbone(tiny_model_dir), seed=0), tokenizer,
                         "regression", max_len=256)
    before, after = margin(start, chosen, rejected), margin(loaded, chosen, rejected)
    assert after > before + 0.05, (before, after)
    assert all(c > r for c, r in zip(loaded.score(chosen), loaded.score(rejected)))


def test_value_rows_are_prefix_input_output_per_assistant_turn(tmp_path):
    from sweet_rl.training.head_trainer import read_value_rows

    path = trajectories(tmp_path / "evaluated.jsonl")
    rows = read_value_rows(path)
    assert [label for _, label in rows] == [1.0, 1.0, 0.0]  # rewards 1.0, 1.0, 0.0
    with open(path, encoding="utf-8") as handle:
        first = json.loads(handle.readline())
    prefix = GROUND_TRUTH_PREFIX.format(ground_truth=first["task"]["ground_truth"])
    turns = [t for t in first["dialogue_history"] if t["role"] == "assistant"]
    assert rows[0][0] == [prefix + t["input"] + t["output"] for t in turns]
    assert len(rows[0][0]) == 2


def test_value_head_trains_saves_and_reloads(tiny_model_dir, tmp_path, trained_models):
    from transformers import AutoTokenizer

    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.training.head_trainer import read_value_rows

    path = trajectories(tmp_path / "evaluated.jsonl")
    save_path = str(tmp_path / "value")
    train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path, save_path=save_path,
                                critic_head="value",
                                max_epochs=2, **FAST))
    metrics = read_metrics(save_path)
    assert len(metrics) == 6  # 3 trajectories x 2 assistant turns x 2 epochs / 2 rows a step
    assert {"value_loss", "accuracy", "mean_logit", "success_rate"} <= set(metrics[0])
    with open(os.path.join(save_path, "critic_head.json"), encoding="utf-8") as handle:
        assert json.load(handle)["kind"] == "value"

    texts = [text for turns, _ in read_value_rows(path) for text in turns]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    in_memory = ScalarCritic(trained_models[-1], tokenizer, "value", max_len=256)
    loaded = load_scalar_critic(save_path, device="cpu", dtype="float32")
    assert loaded.kind == "value"
    assert loaded.score(texts, batch_size=4) == pytest.approx(in_memory.score(texts), abs=1e-5)


def evaluated_rows(tmp_path):
    with open(trajectories(tmp_path / "evaluated.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_value_rows_without_reward_or_prompt_name_file_line_field(tiny_model_dir, tmp_path):
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    rows = evaluated_rows(tmp_path)
    del rows[1]["reward"]
    path, save_path = write_jsonl(tmp_path / "no_reward.jsonl", rows), tmp_path / "out"
    with pytest.raises(RecordError) as err:
        train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path, save_path=str(save_path),
                                    critic_head="value"))
    assert (err.value.path, err.value.line, err.value.field) == (path, 2, "reward")
    assert "run the evaluate stage first" in str(err.value)
    assert not save_path.exists()

    rows = evaluated_rows(tmp_path)
    del rows[2]["dialogue_history"][3]["input"]
    path = write_jsonl(tmp_path / "no_input.jsonl", rows)
    with pytest.raises(RecordError) as err:
        train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path, save_path=str(save_path),
                                    critic_head="value"))
    assert (err.value.line, err.value.field) == (3, "dialogue_history[3].input")
    assert not save_path.exists()


def test_a_log_prob_critic_is_not_a_scalar_critic(tiny_model_dir):
    with pytest.raises(FileNotFoundError, match="critic_head.json"):
        load_scalar_critic(tiny_model_dir)


def test_pairs_are_not_a_trajectory_file(tiny_model_dir, tmp_path):
    """--critic_head value on critic pairs: the missing trajectory field is named."""
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    with pytest.raises(RecordError) as err:
        train_dpo(PreferenceOptions(pretrain=tiny_model_dir,
                                    dataset=critic_pairs(tmp_path / "pairs.jsonl"),
                                    save_path=str(tmp_path / "out"), critic_head="value"))
    assert (err.value.line, err.value.field) == (1, "task")
