"""DPO training end to end on the tiny model, through the script's main."""

import json
import os
import subprocess
import sys

import pytest
import torch

from sweet_rl.records import RecordError
from tests.conftest import REPO_ROOT
from tests.training.helpers import GOOD, TEMPLATE, critic_pairs, single_turn_pairs, write_jsonl

METRIC_KEYS = {
    "loss",
    "accuracy",
    "chosen_reward",
    "rejected_reward",
    "margin",
    "lr",
    "epoch",
    "step",
}
FAST = dict(learning_rate=1e-3, train_batch_size=2, micro_train_batch_size=1, max_len=256,
            lr_warmup_ratio=0.0, seed=0)


def read_metrics(save_path):
    with open(os.path.join(save_path, "metrics.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def state_dict(path):
    from transformers import AutoModelForCausalLM

    return {
        k: v.float() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()
    }


def test_dpo_learns_pairs_changes_every_parameter_and_saves(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    save_path = str(tmp_path / "dpo")
    train_dpo(PreferenceOptions(pretrain=tiny_model_dir,
                                dataset=single_turn_pairs(tmp_path / "pairs.jsonl"),
                                save_path=save_path, max_epochs=3, nll_loss_coef=0.1, **FAST))

    metrics = read_metrics(save_path)
    assert len(metrics) == 6  # 4 pairs x 3 epochs / 2 pairs per step
    assert all(METRIC_KEYS <= set(m) and "nll" in m for m in metrics)
    assert metrics[0]["accuracy"] < 1.0  # step 1: policy == reference, every reward is 0
    assert metrics[-1]["accuracy"] == 1.0 and metrics[-1]["margin"] > 0
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert metrics[-1]["lr"] < metrics[1]["lr"]  # cosine decay

    before, after = state_dict(tiny_model_dir), state_dict(save_path)
    assert before.keys() == after.keys()
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert not unchanged, f"parameters not trained: {unchanged}"

    model = AutoModelForCausalLM.from_pretrained(save_path)
    tokenizer = AutoTokenizer.from_pretrained(save_path)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "def f"}], tokenize=False,
                                           add_generation_prompt=True)
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]
    assert os.path.exists(os.path.join(save_path, "training.config.json"))


def test_critic_from_config_with_per_turn_mean(tiny_model_dir, tmp_path):
    """configs/critic_backend.json with command-line overrides (no bf16 on the CPU): template
    masking over both turns, the paper's per-turn mean. The file's zero_stage 3 is ignored
    with a warning outside the deepspeed launcher, and its flash_attn falls back to sdpa
    where flash_attn is not installed."""
    from sweet_rl.flags import load_options
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    save_path = str(tmp_path / "critic")
    train_dpo(load_options(
        PreferenceOptions, config=str(REPO_ROOT / "configs" / "critic_backend.json"),
        pretrain=tiny_model_dir, dataset=critic_pairs(tmp_path / "critic.jsonl"),
        save_path=save_path, bf16=False, max_epochs=4, per_turn_mean=True, beta=1.0, **FAST))
    metrics = read_metrics(save_path)
    assert len(metrics) == 8 and metrics[-1]["accuracy"] == 1.0
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    with open(os.path.join(save_path, "training.config.json")) as handle:
        used = json.load(handle)["stages"]["train_dpo"]
    assert used["response_template"] == TEMPLATE and used["mean_log_prob"] is True  # from the file
    assert used["learning_rate"] == 1e-3 and used["per_turn_mean"] is True  # from the flags


def bad_file(tmp_path, key="rejected"):
    rows = [{"chosen": "a", key: "b"}, {"chosen": "c", key: "d"}, {"chosen": "e"}]
    return write_jsonl(tmp_path / "bad.jsonl", rows)


def test_missing_rejected_on_line_3_names_file_line_field(tiny_model_dir, tmp_path):
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    path, save_path = bad_file(tmp_path), tmp_path / "out"
    with pytest.raises(RecordError) as err:
        train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path,
                                    save_path=str(save_path)))
    assert (err.value.path, err.value.line, err.value.field) == (path, 3, "rejected")
    assert not save_path.exists()

    # other key names: the error names the file's key
    path = bad_file(tmp_path, key="worse")
    with pytest.raises(RecordError) as err:
        train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path,
                                    save_path=str(save_path), rejected_key="worse"))
    assert (err.value.line, err.value.field) == (3, "worse")


# the stage's script end to end in subprocesses
@pytest.mark.slow
def test_script_exits_2_on_bad_input_and_leaves_save_path_alone(tiny_model_dir, tmp_path):
    path, save_path = bad_file(tmp_path), tmp_path / "out"
    result = subprocess.run([sys.executable, "scripts/train_dpo.py", "--pretrain", tiny_model_dir,
                             "--dataset", path, "--save_path", str(save_path)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"{path}, line 3: field 'rejected': missing" in result.stderr
    assert not save_path.exists()


def test_reference_scores_come_from_ref_pretrain_before_training(tiny_model_dir, tmp_path):
    """Two pairs, one optimizer step of two micro-batches, both scored before the update.

    Without --ref_pretrain the reference is the initial policy itself: every step-1 reward is
    beta x (policy - reference) = 0. With --ref_pretrain another model (other random weights)
    the step-1 chosen reward is beta x the mean over the two pairs of (policy's - other's
    token-mean log-prob of the chosen response), computed here independently through the
    models' own cross-entropy (``labels`` = the response ids, -100 on the prompt).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.models.tiny_model import build_tiny_model
    from sweet_rl.training.data import read_preference_pairs
    from sweet_rl.training.collators import SequenceTokenizer

    other = build_tiny_model(str(tmp_path / "reference"), seed=1)
    pairs = single_turn_pairs(tmp_path / "pairs.jsonl", n=2)
    beta = 0.5
    for name, ref in [("same", None), ("different", other)]:
        train_dpo(PreferenceOptions(
            pretrain=tiny_model_dir,
                                    ref_pretrain=ref,
                                    dataset=pairs,
                                    save_path=str(tmp_path / name),
                                    max_epochs=1,
                                    mean_log_prob=True,
                                    beta=beta,
                                    **FAST,
                                    ))
    same, different = read_metrics(tmp_path / "same")[0], read_metrics(tmp_path / "different")[0]
    assert same["chosen_reward"] == pytest.approx(0.0, abs=1e-6)
    assert same["rejected_reward"] == pytest.approx(0.0, abs=1e-6)

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    seq = SequenceTokenizer(tok, 256)
    policy, reference = (AutoModelForCausalLM.from_pretrained(p) for p in (tiny_model_dir, other))

    def mean_logp(model, side):
        ids = torch.tensor([side.input_ids])
        labels = torch.tensor([[i if t else -100 for i, t in zip(side.input_ids, side.turn_ids)]])
        with torch.no_grad():
            return -model(input_ids=ids, labels=labels).loss.item()

    expected = {"chosen_reward": [], "rejected_reward": []}
    for pair in read_preference_pairs(pairs):
        chosen, rejected = seq.pair(pair.chosen, pair.rejected)
        for key, side in [("chosen_reward", chosen), ("rejected_reward", rejected)]:
            expected[key].append(beta * (mean_logp(policy, side) - mean_logp(reference, side)))
    for key, values in expected.items():
        assert abs(sum(values)) > 1e-3  # the two models really differ
        assert different[key] == pytest.approx(sum(values) / len(values), abs=1e-4)


def frontend_critic_pairs(path, strings_path):
    """The original's frontend critic pairs (its evaluate_html.py) made from string pairs:
    each side an object {"input": ground-truth prefix + the last turn's chat-formatted prompt
    (up to the assistant header and its "\n\n"), "output": the last generation}."""
    rows = []
    with open(strings_path, encoding="utf-8") as handle:
        for line in handle:
            pair = json.loads(line)
            cut = {side: pair[side].rindex(TEMPLATE) + len(TEMPLATE + "\n\n") for side in pair}
            rows.append({side: {"input": pair[side][:cut[side]], "output": pair[side][cut[side]:]}
                         for side in ("chosen", "rejected")})
    return write_jsonl(path, rows)


def test_frontend_critic_pairs_with_input_output_objects_train(tiny_model_dir, tmp_path):
    """Object sides train exactly like their input + output strings: same step-1 metrics
    (one seed, one data order), and the critic learns them."""
    from sweet_rl.flags import load_options
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.training.data import read_preference_pairs

    strings = critic_pairs(tmp_path / "strings.jsonl")
    objects = frontend_critic_pairs(tmp_path / "frontend.jsonl", strings)
    assert [(p.chosen, p.rejected) for p in read_preference_pairs(objects)] == [
        (p.chosen, p.rejected) for p in read_preference_pairs(strings)]
    with open(objects, encoding="utf-8") as handle:
        first = json.loads(handle.readline())
    assert set(first["chosen"]) == {"input", "output"} and first["chosen"]["output"] == GOOD

    runs = {}
    for name, dataset in (("objects", objects), ("strings", strings)):
        save_path = str(tmp_path / name)
        train_dpo(load_options(
            PreferenceOptions, config=str(REPO_ROOT / "configs" / "critic_backend.json"),
            pretrain=tiny_model_dir, dataset=dataset, save_path=save_path, bf16=False, max_epochs=4,
            beta=1.0, **FAST))
        runs[name] = read_metrics(save_path)
    assert len(runs["objects"]) == 8 and runs["objects"][-1]["accuracy"] == 1.0
    for a, b in zip(runs["objects"], runs["strings"]):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)


def test_malformed_input_output_pairs_name_file_line_field(tiny_model_dir, tmp_path):
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    good = {"input": "a", "output": "b"}
    for bad_side, field in (({"input": "a"}, "rejected.output"),
                            ({"input": 3, "output": "b"}, "rejected.input"),
                            (["a", "b"], "rejected")):
        path = write_jsonl(tmp_path / "bad.jsonl", [{"chosen": good, "rejected": good},
                                                    {"chosen": good, "rejected": bad_side}])
        save_path = tmp_path / "out"
        with pytest.raises(RecordError) as err:
            train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path,
                                        save_path=str(save_path)))
        assert (err.value.path, err.value.line, err.value.field) == (path, 2, field)
        assert not save_path.exists()
    # other key names: the error names the file's key
    path = write_jsonl(tmp_path / "bad.jsonl", [{"chosen": good, "worse": {"output": "b"}}])
    with pytest.raises(RecordError) as err:
        train_dpo(PreferenceOptions(pretrain=tiny_model_dir, dataset=path,
                                    save_path=str(tmp_path / "out"),
                                    rejected_key="worse"))
    assert (err.value.line, err.value.field) == (1, "worse.input")
