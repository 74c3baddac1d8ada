"""The vision-language critic trained end to end on the tiny Qwen2-VL through train_dpo.py's
main (--critic_head vlm_regression), saved, and loaded back by load_vlm_critic."""

import json
import os

import pytest

from sweet_rl.training.vlm_pairs import read_vlm_pairs
from tests.training.vlm_helpers import vlm_pairs

FAST = dict(learning_rate=1e-3, train_batch_size=2, micro_train_batch_size=1, max_len=256,
            lr_warmup_ratio=0.0, seed=0, eval_holdout=0)


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory):
    from sweet_rl.models.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(str(tmp_path_factory.mktemp("tiny-qwen2-vl")), seed=0)


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


def test_vlm_critic_learns_the_pairs_saves_and_reloads(tiny_vlm_dir, tmp_path, trained_models,
                                                       capsys):
    from safetensors import safe_open
    from transformers import AutoProcessor

    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.training.heads import load_backbone
    from sweet_rl.training.vlm_heads import VLMCritic, VLMHeadModel, load_vlm_critic

    pairs_path = vlm_pairs(tmp_path / "data")
    save_path = str(tmp_path / "critic")
    train_dpo(PreferenceOptions(pretrain=tiny_vlm_dir, dataset=pairs_path, save_path=save_path,
                                critic_head="vlm_regression", max_epochs=3, **FAST))

    with open(os.path.join(save_path, "metrics.jsonl"), encoding="utf-8") as handle:
        metrics = [json.loads(line) for line in handle]
    assert len(metrics) == 6  # 4 pairs x 3 epochs / 2 pairs per step
    assert {"bt_loss", "accuracy", "margin"} <= set(metrics[0])
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    summary = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("train_dpo:"))
    assert "examples=4 steps=6 " in summary and summary.endswith("critic_head=vlm_regression")

    # the files: Qwen2-VL's checkpoint names, a bias-free head, the processor, the head info
    with open(os.path.join(save_path, "critic_head.json"), encoding="utf-8") as handle:
        info = json.load(handle)
    processor = AutoProcessor.from_pretrained(tiny_vlm_dir)
    assert info == {"kind": "vlm_regression", "pooling": "mean", "max_len": 256,
                    "max_pixels": processor.image_processor.size["longest_edge"]}
    with safe_open(os.path.join(save_path, "model.safetensors"), framework="pt") as handle:
        keys = set(handle.keys())
        assert handle.get_slice("score_head.weight").get_shape() == [1, 64]
    assert "score_head.bias" not in keys and not any(k.startswith("lm_head") for k in keys)
    assert "model.embed_tokens.weight" in keys and "visual.patch_embed.proj.weight" in keys
    assert os.path.isfile(os.path.join(save_path, "processor_config.json"))

    # reloaded: the scores the model had in memory when training ended
    pairs = read_vlm_pairs(pairs_path)
    items = [item for pair in pairs for item in pair]
    in_memory = VLMCritic(trained_models[-1], processor, max_len=256)
    loaded = load_vlm_critic(save_path, device="cpu")
    assert loaded.kind == "vlm_regression"
    assert loaded.score(items, batch_size=3) == pytest.approx(in_memory.score(items), abs=1e-5)

    # training widened the chosen-minus-rejected margin of the head it started from
    start = VLMCritic(VLMHeadModel(load_backbone(tiny_vlm_dir), seed=0), processor, 256)

    def margin(critic):
        return [critic.score([c])[0] - critic.score([r])[0] for c, r in pairs]

    before, after = margin(start), margin(loaded)
    assert sum(after) / 4 > sum(before) / 4 + 0.02, (before, after)
    assert all(m > 0 for m in after)


def test_a_picture_too_big_for_max_len_stops_before_anything_is_written(tiny_vlm_dir,
                                                                        tmp_path):
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    pairs_path = vlm_pairs(tmp_path / "data", n=2)  # with the template: 16 and 23 tokens
    save_path = tmp_path / "critic"
    with pytest.raises(ValueError, match="reference_1.png: the picture and the template take"):
        train_dpo(PreferenceOptions(pretrain=tiny_vlm_dir, dataset=pairs_path,
                                    save_path=str(save_path),
                                    critic_head="vlm_regression", **dict(FAST, max_len=21)))
    assert not save_path.exists()


def test_the_recipe_overrides_the_critics_pretrain_with_a_later_flag(monkeypatch):
    """run_sweet_frontend.sh trains the VLM critic through sweet_stages.sh's critic stage,
    which names the agent as --pretrain; CRITIC_ARGS repeats --pretrain after it, and the
    command line keeps the later value."""
    from sweet_rl.cli.train_dpo import main
    from sweet_rl.training import run

    seen = []
    monkeypatch.setattr(run, "train_scalar_critic", seen.append)
    main(["--config", "configs/critic_frontend.json", "--pretrain", "agent",
          "--dataset", "pairs.jsonl", "--save_path", "out",
          "--critic_head", "vlm_regression", "--pretrain", "vlm"])
    [options] = seen
    assert options.pretrain == "vlm" and options.critic_head == "vlm_regression"
