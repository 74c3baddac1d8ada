"""sample -> rank -> pair through the scripts' ``main`` with the tiny model on the CPU."""

import json
import os
import subprocess
import sys

import pytest
import torch

from sweet_rl.stages.pairs import PairsOptions, pairs
from sweet_rl.stages.rank import RankOptions, rank
from sweet_rl.stages.sample import SampleOptions, sample
from sweet_rl.records import RecordError
from tests.conftest import REPO_ROOT

N = 4
SAMPLE = dict(best_of_n=N, max_new_tokens=6, data_fraction=0.75, device="cpu", seed=3,
              chunk_size=2)


def _lines(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _write(path, rows):
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from sweet_rl.models.hf_generation import load_tokenizer

    return load_tokenizer(tiny_model_dir)


@pytest.fixture(scope="module")
def offline(tmp_path_factory, tokenizer):
    """4 scripted trajectories (2 tasks x 2 rollouts, two assistant turns each), graded by hand."""
    from sweet_rl.data.offline_demo import build_offline_trajectories
    from sweet_rl.data.tasks import load_tasks

    rows = [
        t.to_dict() for t in build_offline_trajectories(tokenizer, load_tasks(None, 2), rollouts=2)
    ]
    for i, row in enumerate(rows):
        row["reward"] = 1.0 if i < 2 else 0.0  # rollout 0 answers right, rollout 1 wrong
    return _write(tmp_path_factory.mktemp("offline") / "offline.jsonl", rows)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory, tiny_model_dir, offline):
    out = str(tmp_path_factory.mktemp("sampled") / "sampled.jsonl")
    sample(SampleOptions(input_path=offline, output_path=out, agent_model=tiny_model_dir, **SAMPLE))
    return out


@pytest.fixture(scope="module")
def ranked(tmp_path_factory, tiny_model_dir, sampled):
    out = str(tmp_path_factory.mktemp("ranked") / "ranked.jsonl")
    rank(RankOptions(model_id=tiny_model_dir, input_path=sampled, output_path=out,
                     batch_size=3, device="cpu"))
    return out


def _direct_scores(model, tokenizer, context, candidates, suffixes=None):
    """Full forward of ids(context) + ids(candidate) + suffix ids: (sum, count) of the
    candidate's tokens and its suffix (the stop token it ended on)."""
    from sweet_rl.stepwise.scoring import encode

    scores = []
    for k, candidate in enumerate(candidates):
        ctx = encode(tokenizer, context)
        cand = encode(tokenizer, candidate) + (list(suffixes[k]) if suffixes else [])
        with torch.no_grad():
            logits = model(torch.tensor([ctx + cand])).logits[0].float()  # (T, V)
        logps = torch.log_softmax(logits, -1)
        total = sum(logps[len(ctx) + j - 1, tok].item() for j, tok in enumerate(cand))
        scores.append((total, len(cand)))
    return scores


def _direct_whole(model, tokenizer, text):
    """The critic's default (--score_tokens original): every token of the text after the
    first, the text tokenised with special tokens added (vLLM's way)."""
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    with torch.no_grad():
        logps = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)  # (T, V)
    values = [logps[t - 1, ids[t]].item() for t in range(1, len(ids))]
    return sum(values), len(values)


def test_sample_writes_one_record_per_turn(sampled, offline, tiny_model_dir, tokenizer, capsys):
    from transformers import AutoModelForCausalLM

    trajectories = _lines(offline)[:3]  # int(4 * 0.75)
    turns = [(t, k) for t in trajectories for k, m in enumerate(t["dialogue_history"])
             if m["role"] == "assistant"]
    records = _lines(sampled)
    assert len(records) == len(turns) == 6
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for record, (traj, k) in zip(records, turns):
        turn, truth = traj["dialogue_history"][k], traj["task"]["ground_truth"]
        assert record["input"] == turn["input"] and record["older_output"] == turn["output"]
        assert record["input_with_ground_truth"] == (
            f"In light that the final answer is: {truth}." + turn["input"])
        assert record["reward"] == traj["reward"] and record["ground_truth"] == truth
        assert record["messages"] == traj["dialogue_history"][:k + 1]  # as the original
        for key in ("additional_outputs", "additional_reference_logprobs",
                    "additional_reference_logprobs_sum"):
            assert len(record[key]) == N
        assert all(isinstance(o, str) for o in record["additional_outputs"])
        # reference = candidate tokens, plus the <|eot_id|> it stopped on when it did not run
        # out of max_new_tokens (which one is checked exactly in tests/fidelity)
        direct_plain = _direct_scores(
            model, tokenizer, record["input"], record["additional_outputs"]
        )
        direct_eot = _direct_scores(model, tokenizer, record["input"], record["additional_outputs"],
                                    [[tokenizer.eos_token_id]] * N)
        for plain, eot, mean, summed in zip(direct_plain, direct_eot,
                                            record["additional_reference_logprobs"],
                                            record["additional_reference_logprobs_sum"]):
            assert any(summed == pytest.approx(total, abs=1e-3)
                       and mean == pytest.approx(total / count if count else 0.0, abs=1e-4)
                       for total, count in (eot, plain))
    assert len({o for r in records for o in r["additional_outputs"]}) > N  # really sampled
    sidecar = json.loads(open(sampled + ".config.json").read())
    assert sidecar["stages"]["sample_best_of_n"]["best_of_n"] == N


def test_rank_matches_direct_computation_and_no_cache(ranked, sampled, tiny_model_dir, tokenizer,
                                                      tmp_path):
    from transformers import AutoModelForCausalLM

    records = _lines(ranked)
    inputs = _lines(sampled)
    assert len(records) == len(inputs)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for record, source in zip(records, inputs):
        assert {k: v for k, v in record.items() if k != "judge_result"} == source
        direct = [_direct_whole(model, tokenizer, record["input_with_ground_truth"] + o)
                  for o in record["additional_outputs"]]
        expected = [
            t / c - ref for (t, c), ref in zip(direct, record["additional_reference_logprobs"])
        ]
        assert record["judge_result"] == pytest.approx(expected, abs=1e-4)

    plain = str(tmp_path / "no_cache.jsonl")
    rank(RankOptions(model_id=tiny_model_dir, input_path=sampled, output_path=plain,
                     batch_size=2, no_prompt_cache=True, device="cpu"))
    for a, b in zip(records, _lines(plain)):
        assert a["judge_result"] == pytest.approx(b["judge_result"], abs=1e-4)

    flags = str(tmp_path / "sum_no_gt.jsonl")
    rank(RankOptions(model_id=tiny_model_dir, input_path=sampled, output_path=flags,
                     use_sum=True, no_use_ground_truth=True, device="cpu"))
    first = _lines(flags)[0]
    direct = [
        _direct_whole(model, tokenizer, first["input"] + o) for o in first["additional_outputs"]
    ]
    expected = [t - ref for (t, _), ref in zip(direct, first["additional_reference_logprobs_sum"])]
    assert first["judge_result"] == pytest.approx(expected, abs=1e-3)
    sidecar = json.loads(open(flags + ".config.json").read())["stages"]["rank_best_of_n"]
    assert sidecar["score_tokens"] == "original" and sidecar["use_sum"] is True


def test_rank_reads_n_from_each_record(tmp_path, tiny_model_dir, sampled):
    rows = _lines(sampled)[:2]
    for key in ("additional_outputs", "additional_reference_logprobs",
                "additional_reference_logprobs_sum"):
        rows[1][key] = rows[1][key][:2]  # this turn has only 2 candidates
    out = str(tmp_path / "r.jsonl")
    rank(RankOptions(model_id=tiny_model_dir, input_path=_write(tmp_path / "s.jsonl", rows),
                     output_path=out, device="cpu"))
    assert [len(r["judge_result"]) for r in _lines(out)] == [N, 2]


def test_pairs_load_in_training(ranked, tmp_path, tiny_model_dir, tokenizer, capsys):
    from sweet_rl.training.data import read_preference_pairs, tokenize_pairs
    from sweet_rl.training.collators import SequenceTokenizer

    records = _lines(ranked)
    eos = tokenizer.eos_token
    assert eos == "<|eot_id|>"
    split = str(tmp_path / "pairs.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=split, num_pairs=4, seed=1,
                       tokenizer=tiny_model_dir))
    assert "generate_random_pairs:" in capsys.readouterr().out
    rows = _lines(split)
    assert 0 < len(rows) <= 4 * len(records)
    for row in rows:
        assert list(row) == ["chosen", "rejected", "prompt"]
        assert row["chosen"].endswith(eos) and row["rejected"].endswith(eos)
        chosen, rejected = row["chosen"][:-len(eos)], row["rejected"][:-len(eos)]
        # two rollouts of a task share their first prompt: one of them made this pair
        assert any(chosen in _halves(r)[0] and rejected in _halves(r)[1]
                   for r in records if r["input"] == row["prompt"])
    again = str(tmp_path / "again.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=again, num_pairs=4, seed=1,
                       tokenizer=tiny_model_dir))
    assert _lines(again) == rows  # seeded

    whole = str(tmp_path / "whole.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=whole, num_pairs=4, no_prompt=True, seed=1,
                       tokenizer=tiny_model_dir))
    whole_rows = _lines(whole)
    assert all(set(r) == {"chosen", "rejected"} and r["chosen"].startswith("<|begin_of_text|>")
               and r["chosen"].endswith(eos) for r in whole_rows)

    seq = SequenceTokenizer(tokenizer, max_len=4096)
    for path in (split, whole):
        examples = tokenize_pairs(read_preference_pairs(path), seq)
        assert all(e["chosen"].num_loss_tokens > 0 and e["rejected"].num_loss_tokens > 0
                   for e in examples)
        # the trained tokens end with the agent's end-of-turn token
        assert all(e["chosen"].input_ids[-1] == tokenizer.eos_token_id for e in examples)

    sft = str(tmp_path / "sft.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=sft, get_sft=True, tokenizer=tiny_model_dir))
    sft_rows = _lines(sft)
    assert len(sft_rows) == len(records)
    for row, record in zip(sft_rows, records):
        best = max(range(N), key=lambda k: (record["judge_result"][k], -k))
        assert row == {"prompt": record["input"],
                       "completion": record["additional_outputs"][best] + eos,
                       "judge_result": record["judge_result"][best]}


def _halves(record):
    """(texts of the high half, texts of the low half): ascending stable sort, low = the
    first N // 2."""
    order = sorted(range(len(record["judge_result"])), key=lambda k: record["judge_result"][k])
    outs = record["additional_outputs"]
    return {outs[k] for k in order[len(order) // 2:]}, {outs[k] for k in order[:len(order) // 2]}


def test_train_dpo_runs_on_pairs(ranked, tmp_path, tiny_model_dir):
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions

    agent_pairs = str(tmp_path / "pairs.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=agent_pairs, num_pairs=1, no_prompt=True,
                       tokenizer=tiny_model_dir))
    train_dpo(PreferenceOptions(
        pretrain=tiny_model_dir, dataset=agent_pairs, save_path=str(tmp_path / "agent"),
        learning_rate=1e-4, train_batch_size=2, micro_train_batch_size=1, max_len=512, max_epochs=1,
        nll_loss_coef=0.01, lr_warmup_ratio=0.0, save_steps=-1))
    assert os.path.exists(tmp_path / "agent" / "metrics.jsonl")


def _torn(path, full_rows, keep):
    """A killed run's file: ``keep`` whole records and half of the next line."""
    text = "".join(json.dumps(r) + "\n" for r in full_rows[:keep])
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text + json.dumps(full_rows[keep])[:40])
    return str(path)


def test_sample_resume_gives_each_record_once(tmp_path, tiny_model_dir, offline, sampled):
    full = _lines(sampled)
    out = _torn(tmp_path / "s.jsonl", full, 3)
    with pytest.raises(FileExistsError):
        sample(SampleOptions(input_path=offline, output_path=out, agent_model=tiny_model_dir,
                             **SAMPLE))
    sample(SampleOptions(input_path=offline, output_path=out, agent_model=tiny_model_dir,
                         to_continue=True, **SAMPLE))
    resumed = _lines(out)
    assert [r["input"] + r["older_output"] for r in resumed] == [
        r["input"] + r["older_output"] for r in full
    ]
    assert [r["additional_outputs"] for r in resumed] == [r["additional_outputs"] for r in full]
    for a, b in zip(resumed, full):
        assert a["additional_reference_logprobs"] == pytest.approx(
            b["additional_reference_logprobs"], abs=1e-5
        )
    # a complete file resumes to itself without loading a model
    sample(SampleOptions(input_path=offline, output_path=out, agent_model="/nonexistent",
                         to_continue=True, **SAMPLE))
    assert len(_lines(out)) == len(full)


def test_rank_resume_and_mismatch(tmp_path, tiny_model_dir, sampled, ranked):
    full = _lines(ranked)
    out = _torn(tmp_path / "r.jsonl", full, 2)
    rank(RankOptions(model_id=tiny_model_dir, input_path=sampled, output_path=out,
                     to_continue=True, device="cpu"))
    resumed = _lines(out)
    assert len(resumed) == len(full)
    for a, b in zip(resumed, full):
        assert a["additional_outputs"] == b["additional_outputs"]
        assert a["judge_result"] == pytest.approx(b["judge_result"], abs=1e-5)
    # an output made from other input is never extended
    other = _lines(sampled)
    other[0]["additional_outputs"][0] += "!"
    before = open(out, encoding="utf-8").read()
    with pytest.raises(RecordError, match="line 1"):
        rank(RankOptions(model_id=tiny_model_dir, input_path=_write(tmp_path / "o.jsonl", other),
                         output_path=out, to_continue=True))
    assert open(out, encoding="utf-8").read() == before


def test_bad_input_names_file_line_field(tmp_path, offline, sampled, ranked, tiny_model_dir):
    rows = _lines(offline)
    del rows[1]["reward"]
    bad = _write(tmp_path / "bad.jsonl", rows)
    out = tmp_path / "out.jsonl"
    with pytest.raises(RecordError) as err:
        sample(SampleOptions(input_path=bad, output_path=str(out), agent_model=tiny_model_dir,
                             **SAMPLE))
    assert (err.value.path, err.value.line, err.value.field) == (bad, 2, "reward")
    assert not out.exists()

    steps = _lines(sampled)
    steps[2]["additional_reference_logprobs"] = steps[2]["additional_reference_logprobs"][:-1]
    steps[1]["additional_outputs"][0] = 7
    bad_steps = _write(tmp_path / "bad_steps.jsonl", steps)
    out.write_text("keep me\n")
    with pytest.raises(RecordError) as err:
        rank(RankOptions(model_id=tiny_model_dir, input_path=bad_steps, output_path=str(out),
                         overwrite=True))
    assert (err.value.line, err.value.field) == (2, "additional_outputs[0]")
    assert out.read_text() == "keep me\n"

    with pytest.raises(RecordError) as err:
        pairs(PairsOptions(input_path=sampled, output_path=str(out), tokenizer=tiny_model_dir))
    assert (err.value.path, err.value.line, err.value.field) == (sampled, 1, "judge_result")
    assert out.read_text() == "keep me\n"


def test_script_exits_nonzero_on_bad_input(tmp_path):
    bad = _write(
        tmp_path / "bad.jsonl",
        [{"task": {"problem_description": "x", "ground_truth": "y"}, "answer": ""}],
    )
    result = subprocess.run([sys.executable, "scripts/sample_best_of_n.py", bad,
                             str(tmp_path / "o.jsonl"), "--agent_model", "tiny"],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert result.returncode == 2
    assert f"{bad}, line 1: field 'dialogue_history': missing" in result.stderr
    assert not (tmp_path / "o.jsonl").exists()
