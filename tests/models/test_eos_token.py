"""The pairs stage's end-of-turn token: read from the tokenizer's files where they name it,
the very token ``AutoTokenizer`` gives, without importing torch."""

import json
import shutil
import subprocess
import sys

import pytest

from sweet_rl.models.hf_generation import eos_token_of, load_tokenizer
from tests.conftest import REPO_ROOT, RUN_SAYING_TORCH


def _edited_copy(src, dst, edit):
    shutil.copytree(src, dst)
    config = dst / "tokenizer_config.json"
    data = json.loads(config.read_text())
    edit(data)
    config.write_text(json.dumps(data))
    return str(dst)


def test_the_tiny_tokenizer_s_eos_as_autotokenizer_gives_it(tiny_model_dir):
    assert eos_token_of(tiny_model_dir) == load_tokenizer(tiny_model_dir).eos_token == "<|eot_id|>"


def test_an_eos_saved_as_an_added_token_is_its_content(tiny_model_dir, tmp_path):
    def as_added_token(data):
        # as older releases of transformers wrote it (Llama-2's files, for one)
        data["eos_token"] = {"__type": "AddedToken", "content": "<|end_of_text|>",
                             "lstrip": False, "normalized": False, "rstrip": False,
                             "single_word": False}

    path = _edited_copy(tiny_model_dir, tmp_path / "tok", as_added_token)
    assert eos_token_of(path) == load_tokenizer(path).eos_token == "<|end_of_text|>"


@pytest.mark.parametrize("edit", [lambda data: data.pop("eos_token"),
                                  lambda data: data.update(eos_token=None)],
                         ids=["no_entry", "null"])
def test_a_config_that_names_no_eos_loads_the_tokenizer(tiny_model_dir, tmp_path, edit):
    path = _edited_copy(tiny_model_dir, tmp_path / "tok", edit)
    assert eos_token_of(path) == (load_tokenizer(path).eos_token or "")


def test_the_pairs_stage_does_not_import_torch(tiny_model_dir, tmp_path):
    ranked = tmp_path / "ranked.jsonl"
    ranked.write_text("")
    out = tmp_path / "pairs.jsonl"
    result = subprocess.run([sys.executable, "-c", RUN_SAYING_TORCH,
                             "scripts/generate_random_pairs_from_ranks.py", str(ranked),
                             str(out), "--tokenizer", tiny_model_dir],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "eos '<|eot_id|>'" in result.stdout
    assert "torch imported: False" in result.stderr, result.stderr[-2000:]
