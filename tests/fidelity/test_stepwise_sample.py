"""sample_best_of_n writes what the original's sample_best_of_n.py wrote.

* ``messages`` of the step record for dialogue entry i is ``dialogue_history[: i + 1]``: the
  dialogue up to and including the current assistant turn, entries exactly as stored;
* the reference log-probs are those of every token vLLM returned for the sample -- its text's
  tokens plus the end-of-turn token it stopped on (V0 keeps the stop token in
  ``token_ids``/``logprobs`` and strips it only from the text); a sample cut at max_tokens has
  no stop token. ``--exclude_stop_token`` gives our earlier form (text tokens only);
* the stage never samples with the tiny random model by default: without ``--agent_model`` it
  uses the original's default agent (Llama-3.1-8B-Instruct, by hub id) and says so.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from sweet_rl.stages.sample import SampleOptions, sample
from tests.conftest import REPO_ROOT
from tests.model_helpers import loud_stop_model, write_offline

N, NEW_TOKENS, SEED = 8, 3, 5


@pytest.fixture(scope="module")
def stop_model(tmp_path_factory, tiny_model_dir):
    """The tiny model with a loud <|eot_id|> (tests/model_helpers.py): a batch holds both
    stopped and cut candidates."""
    return loud_stop_model(tiny_model_dir, str(tmp_path_factory.mktemp("stop-model")))


@pytest.fixture(scope="module")
def offline(tmp_path_factory, tiny_model_dir):
    """Two evaluated trajectories with two assistant turns each, entries stored with keys in
    an unusual order and an extra key (tests/model_helpers.py)."""
    from sweet_rl.models.hf_generation import load_tokenizer

    path = tmp_path_factory.mktemp("offline") / "offline.jsonl"
    return write_offline(path, load_tokenizer(tiny_model_dir))


def _lines(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _sample(offline, out, model, **flags):
    sample(SampleOptions(input_path=offline, output_path=str(out), agent_model=model, best_of_n=N,
                         max_new_tokens=NEW_TOKENS, seed=SEED, device="cpu", **flags))
    return _lines(out)


def test_stepwise_sample_messages_are_the_dialogue_through_the_turn(tmp_path, offline, stop_model):
    records = _sample(offline, tmp_path / "s.jsonl", stop_model)
    stored = [(row, i) for row in _lines(offline) for i, turn in enumerate(row["dialogue_history"])
              if turn["role"] == "assistant"]
    assert len(records) == len(stored) == 4
    for record, (row, i) in zip(records, stored):
        # same entries, same key order, the current assistant turn included
        assert json.dumps(record["messages"]) == json.dumps(row["dialogue_history"][: i + 1])
        assert record["messages"][-1]["output"] == record["older_output"]
    assert [len(r["messages"]) for r in records] == [2, 4, 2, 4]


def _direct(model, tokenizer, prompt, text, stop_id):
    """Teacher-forced (sum, count) of ids(text) [+ stop id] after ids(prompt)."""
    from sweet_rl.stepwise.scoring import encode

    context = encode(tokenizer, prompt)
    own = encode(tokenizer, text) + ([stop_id] if stop_id is not None else [])
    with torch.no_grad():
        logps = torch.log_softmax(model(torch.tensor([context + own])).logits[0].float(), -1)
    values = [logps[len(context) + j - 1, tok].item() for j, tok in enumerate(own)]
    return sum(values), len(values)


def test_stepwise_sample_reference_includes_the_stop_token(tmp_path, offline, stop_model):
    from transformers import AutoModelForCausalLM

    from sweet_rl.models.hf_generation import HFGenerator
    from sweet_rl.seeding import candidate_seeds, row_seed

    with_stop = _sample(offline, tmp_path / "with.jsonl", stop_model)
    without = _sample(offline, tmp_path / "without.jsonl", stop_model, exclude_stop_token=True)
    generator = HFGenerator(stop_model, device="cpu", max_new_tokens=NEW_TOKENS, batch_size=16)
    model = AutoModelForCausalLM.from_pretrained(stop_model).eval()
    eot = generator.tokenizer.eos_token_id
    stops = []
    for index, (a, b) in enumerate(zip(with_stop, without)):
        assert a["additional_outputs"] == b["additional_outputs"]  # same seeds, same samples
        # the same generation again, now with the stop token each row ended on
        again = generator.generate_with_stops([a["input"]] * N,
                                              seeds=candidate_seeds(row_seed(SEED, index), N))
        assert [g.text for g in again] == a["additional_outputs"]
        for g, mean, total, plain_mean, plain_total in zip(
                again, a["additional_reference_logprobs"], a["additional_reference_logprobs_sum"],
                b["additional_reference_logprobs"], b["additional_reference_logprobs_sum"]):
            stops.append(g.stop_id)
            expected, count = _direct(model, generator.tokenizer, a["input"], g.text, g.stop_id)
            assert total == pytest.approx(expected, abs=1e-4)
            assert mean == pytest.approx(expected / count, abs=1e-4)
            plain, plain_count = _direct(model, generator.tokenizer, a["input"], g.text, None)
            assert plain_total == pytest.approx(plain, abs=1e-4)
            assert plain_mean == pytest.approx(
                plain / plain_count if plain_count else 0.0, abs=1e-4
            )
    # both kinds occur: candidates that stopped on <|eot_id|> and candidates cut at 3 tokens
    assert set(stops) == {eot, None}


# the stage's script end to end in a subprocess
@pytest.mark.slow
def test_stepwise_sample_defaults_to_the_originals_agent_and_says_so(tmp_path, offline):
    # Offline (as every test is), the hub model cannot load: the run names it and exits 2
    # with one line, without writing anything -- it never falls back to the tiny model.
    out = tmp_path / "out.jsonl"
    result = subprocess.run([sys.executable, "scripts/sample_best_of_n.py", offline, str(out)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert result.returncode == 2
    assert (
        "sampling with meta-llama/Llama-3.1-8B-Instruct (the original's default agent"
        in result.stderr
    )
    error = result.stderr[result.stderr.index("\nerror: "):]
    assert "meta-llama/Llama-3.1-8B-Instruct" in error and "Traceback" not in result.stderr
    assert not out.exists()


def test_stepwise_sample_agent_model_tiny_selects_the_embedded_model(tmp_path, offline):
    out = str(tmp_path / "tiny.jsonl")
    sample(SampleOptions(input_path=offline, output_path=out, agent_model="tiny", best_of_n=2,
                         max_new_tokens=2,
                         data_fraction=0.5, device="cpu"))
    assert [len(r["additional_outputs"]) for r in _lines(out)] == [2, 2]
    with open(out + ".config.json", encoding="utf-8") as handle:
        assert json.load(handle)["stages"]["sample_best_of_n"]["agent_model"] == "tiny"
