"""Every real ColBench reference solution, graded as its own answer, scores 1.0 — except the
tasks that cannot, named here with the reason. Reads ``../shared/colbench/backend_test.jsonl``
(the paper's 1000 backend test tasks; not part of the repo)."""

import json

import pytest

from sweet_rl.grading.grader import Grader
from tests.conftest import SHARED_COLBENCH, colbench_file

pytestmark = pytest.mark.slow  # every real reference solution through the sandbox

BACKEND_TEST = SHARED_COLBENCH / "backend_test.jsonl"

# row index (0-based) -> why the reference cannot score 1.0 against itself
CANNOT_PASS = {
    264: "draws from `random` without a seed: two runs give different strings",
    741: "numpy.corrcoef's last bits differ between two processes (1.0 vs 0.9999999999999998)",
}
CANNOT_PASS_BENCHMARK_RULES = {
    456: "the correct answer contains the word `sudo`, which the published word list blocks",
}


@pytest.fixture(scope="module")
def tasks():
    with open(colbench_file(BACKEND_TEST.name)) as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("rules", ["benchmark", "strict"])
def test_references_pass_as_their_own_answers(tasks, rules, tmp_path):
    assert len(tasks) == 1000
    items = [(t["ground_truth"], t["ground_truth"], t["test_cases"]) for t in tasks]
    results = Grader(rules, workers=2, scratch_root=str(tmp_path)).grade(items)
    exempt = dict(CANNOT_PASS)
    if rules == "benchmark":
        exempt.update(CANNOT_PASS_BENCHMARK_RULES)
    failing = {i: sorted(set(r.tests)) for i, r in enumerate(results) if r.reward < 1.0}
    unexpected = {i: why for i, why in failing.items() if i not in exempt}
    assert unexpected == {}
    if rules == "benchmark":
        assert results[456].blocked_word == "sudo"
    # the exemptions are real: these tasks do fail (the nondeterministic ones may pass by luck)
    assert 456 in failing or rules == "strict"


def test_references_are_wrapped_in_fences_like_real_answers(tasks, tmp_path):
    # answers arrive as chat text with a fenced block; the grader cuts the code out
    sample = tasks[:40]
    items = [(f"Here you go:\n```python\n{t['ground_truth']}\n```\nDone.", t["ground_truth"],
              t["test_cases"]) for t in sample]
    results = Grader("benchmark", workers=2, scratch_root=str(tmp_path)).grade(items)
    assert [r.reward for r in results] == [1.0] * len(sample)
