"""The tiny model's tokenizer learns from the package's frozen corpus and sample tasks, wherever
the module sits in the package."""

import json
from pathlib import Path

import sweet_rl
from sweet_rl.models.tiny_model import _training_text

PACKAGE = Path(sweet_rl.__file__).resolve().parent


def test_the_training_text_holds_the_frozen_corpus_and_the_sample_tasks():
    text = list(_training_text())
    corpus = sorted((PACKAGE / "tiny_corpus").glob("*.txt"))
    assert len(corpus) == 6
    assert text[:len(corpus)] == [p.read_text(encoding="utf-8") for p in corpus]
    first_task = json.loads((PACKAGE / "data" / "sample_backend_tasks.jsonl")
                            .read_text(encoding="utf-8").splitlines()[0])
    assert first_task["problem_description"] in text
    assert first_task["ground_truth"] in text
