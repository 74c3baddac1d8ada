"""Rejection fine-tuning: SFT on successful trajectories, loss on the agent's turns only."""

import json
import os

from tests.training.helpers import trajectories
from tests.training.test_collators import BOS, EOT, HE, HS  # special-token ids, documented there


def test_sft_masks_assistant_turns_and_learns(tiny_model_dir, tmp_path):
    """Two of three trajectories have reward 1. Each text is the last turn's input + output +
    <|eot_id|>: user q / assistant "What x?" / user "x is 1" / assistant answer -- trained
    tokens are exactly the two assistant turns (after the header, through <|eot_id|>)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sweet_rl.stages.train import train_sft
    from sweet_rl.training.options import SFTOptions
    from sweet_rl.training.data import read_sft_examples
    from sweet_rl.training.collators import SequenceTokenizer

    path = trajectories(tmp_path / "traj.jsonl")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    seq = SequenceTokenizer(tok, 512, "<|start_header_id|>assistant<|end_header_id|>")
    examples = read_sft_examples(path, seq, min_reward=1.0)
    assert len(examples) == 2
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    for example, question in zip(examples, ["def f", "return x"]):
        ids, turns = example["sequence"].input_ids, example["sequence"].turn_ids
        user = lambda m: [HS, *enc("user"), HE, *enc("\n"), *enc("\n"), *enc(m), EOT]  # noqa: E731
        head = [HS, *enc("assistant"), HE]
        turn1 = [*enc("\n"), *enc("\n"), *enc("What x?"), EOT]
        turn2 = [*enc("\n"), *enc("\n"), *enc("I WANT TO ANSWER: def f"), EOT]
        assert ids == [BOS] + user(question) + head + turn1 + user("x is 1") + head + turn2
        assert turns == ([0] * (1 + len(user(question)) + len(head)) + [1] * len(turn1)
                         + [0] * (len(user("x is 1")) + len(head)) + [2] * len(turn2))

    save_path = str(tmp_path / "rft")
    train_sft(SFTOptions(pretrain=tiny_model_dir, dataset=path, save_path=save_path,
                         learning_rate=1e-3,
                         max_epochs=6, train_batch_size=2, micro_train_batch_size=1, max_len=512,
                         lr_warmup_ratio=0.0, seed=0, eval_steps=-1, wandb_run_name="sweet_rft"))
    with open(os.path.join(save_path, "metrics.jsonl")) as handle:
        metrics = [json.loads(line) for line in handle]
    assert len(metrics) == 6 and all({"loss", "lr", "epoch", "step"} <= set(m) for m in metrics)
    losses = [m["loss"] for m in metrics]
    assert all(a > b for a, b in zip(losses, losses[1:])) and losses[-1] < 0.9 * losses[0]
    assert AutoModelForCausalLM.from_pretrained(save_path).num_parameters() > 0
    # the original's openrlhf flags: --wandb_run_name names the run, --eval_steps is a notice
    import torch

    arguments = torch.load(os.path.join(save_path, "training_args.bin"), weights_only=False)
    assert arguments.run_name == "sweet_rft"
    with open(os.path.join(save_path, "training.config.json")) as handle:
        recorded = json.load(handle)["stages"]["train_sft"]
    assert recorded["wandb_run_name"] == "sweet_rft" and recorded["use_wandb"] is None


def test_first_share_of_the_dataset_is_held_out(tiny_model_dir, tmp_path, capsys):
    """--eval_holdout keeps the first int(n * share) examples out of training, as the
    original's openrlhf fork keeps its first 3% as an evaluation split: 2 successful rows with
    a share of 0.5 leave 1 to train on."""
    from sweet_rl.stages.train import train_sft
    from sweet_rl.training.options import SFTOptions

    path = trajectories(tmp_path / "traj.jsonl")
    train_sft(SFTOptions(pretrain=tiny_model_dir, dataset=path, save_path=str(tmp_path / "rft"),
                         max_epochs=1, train_batch_size=1, micro_train_batch_size=1, max_len=512,
                         eval_holdout=0.5))
    assert "train_sft: stage=train_sft examples=1 steps=1 " in capsys.readouterr().out
