"""The rank stage with the frontend's vision-language critic (``--critic_type vlm_regression``):
each candidate is scored with the reference screenshot of its turn's task, found by the step
record's ground truth in the evaluated trajectory file the records were sampled from."""

from __future__ import annotations

import json

import pytest

from sweet_rl.stages.rank import RankOptions, rank
from sweet_rl.stages.factory import build_judge
from sweet_rl.stages.groups import JudgeOptions
from sweet_rl.io import read_jsonl
from sweet_rl.records import StepSample
from tests.training.helpers import BAD, GOOD, QUESTIONS, TEMPLATE, dialogue
from tests.training.vlm_helpers import vlm_pairs


def page(task: int) -> str:
    return f"<html><body>page {task}</body></html>"


@pytest.fixture(scope="module")
def critic_dir(tmp_path_factory):
    """A VLM critic trained (train_dpo.py --critic_head vlm_regression) on four tasks whose
    answer is always chosen over the refusal, each task shown by its own reference picture."""
    from sweet_rl.stages.train import train_dpo
    from sweet_rl.training.options import PreferenceOptions
    from sweet_rl.models.tiny_vlm import build_tiny_vlm

    folder = tmp_path_factory.mktemp("vlm_critic")
    model = build_tiny_vlm(str(folder / "tiny-qwen2-vl"), seed=0)
    save_path = str(folder / "critic")
    train_dpo(PreferenceOptions(
        pretrain=model, dataset=vlm_pairs(folder / "data"), save_path=save_path,
        critic_head="vlm_regression", max_epochs=3, learning_rate=1e-3, train_batch_size=2,
        micro_train_batch_size=1, max_len=256, lr_warmup_ratio=0.0, seed=0, eval_holdout=0))
    return {"path": save_path, "pictures": folder / "data"}


@pytest.fixture
def evaluated(critic_dir, tmp_path):
    """The evaluated offline file: tasks 0 and 1 (two rollouts each) with their reference
    screenshots, stored relative to the file as evaluate_html stores them."""
    rows = [{"task": {"problem_description": QUESTIONS[task], "ground_truth": page(task)},
             "dialogue_history": [], "answer": "No answer", "reward": 0.5,
             "reference_screenshot": f"../{critic_dir['pictures'].name}/reference_{task}.png"}
            for _ in range(2) for task in range(2)]
    folder = critic_dir["pictures"].parent / tmp_path.name
    folder.mkdir()
    path = folder / "offline.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def step(task: int, candidates) -> dict:
    """The last turn of task ``task``'s dialogue with its candidates (sample stage output)."""
    prompt = dialogue(QUESTIONS[task], "What x?", "x is 1") + TEMPLATE + "\n\n"
    return StepSample.from_dict({
        "input": prompt, "input_with_ground_truth": f"In light: {page(task)}." + prompt,
        "older_output": BAD, "reward": 0.5, "ground_truth": page(task),
        "messages": [{"role": "user", "content": QUESTIONS[task]}],
        "additional_outputs": list(candidates),
        "additional_reference_logprobs": [0.0] * len(candidates),
        "additional_reference_logprobs_sum": [0.0] * len(candidates)}).to_dict()


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_rank_scores_each_turn_with_its_tasks_reference_picture(critic_dir, evaluated,
                                                                tmp_path):
    from sweet_rl.training.vlm_heads import load_vlm_critic

    candidates = [BAD, GOOD, BAD]
    steps = write(tmp_path / "sampled.jsonl", [step(0, candidates), step(1, candidates)])
    out = tmp_path / "ranked.jsonl"
    rank(RankOptions(input_path=steps, output_path=str(out), model_id=critic_dir["path"],
                     critic_type="vlm_regression", device="cpu", batch_size=4,
                     screenshots_from=evaluated))
    ranked = read_jsonl(str(out))
    for record in ranked:
        bad, good, bad_again = record["judge_result"]
        # the critic learnt the answer over the refusal; the same candidate in another row of
        # the batch scores the same up to the float kernels' summation order
        assert good > bad and bad_again == pytest.approx(bad, abs=1e-5)

    # the scores are the critic's of (the task's own picture, prompt + candidate)
    critic = load_vlm_critic(critic_dir["path"], device="cpu")
    pictures = [str(critic_dir["pictures"] / f"reference_{task}.png") for task in (0, 1)]
    for task, record in enumerate(ranked):
        own = critic.score([(pictures[task], record["input"] + c) for c in candidates])
        other = critic.score([(pictures[1 - task], record["input"] + c) for c in candidates])
        assert record["judge_result"] == pytest.approx(own, abs=1e-5)
        assert record["judge_result"] != pytest.approx(other, abs=1e-5)
    sidecar = json.loads((tmp_path / "ranked.jsonl.config.json").read_text())
    assert sidecar["stages"]["rank_best_of_n"]["critic_type"] == "vlm_regression"
    assert sidecar["stages"]["rank_best_of_n"]["screenshots_from"] == evaluated


def test_a_turn_without_a_reference_picture_is_an_error(critic_dir, evaluated, tmp_path,
                                                        ):
    steps = write(tmp_path / "sampled.jsonl", [step(0, [GOOD]), step(3, [GOOD])])
    with pytest.raises(ValueError, match=r"pass --screenshots_from"):
        rank(RankOptions(input_path=steps, output_path=str(tmp_path / "a.jsonl"),
                         model_id=critic_dir["path"], critic_type="vlm_regression"))
    # task 3's page is not in the evaluated file
    with pytest.raises(ValueError, match="no reference screenshot for the step record whose "
                                         "ground_truth begins '<html><body>page 3"):
        rank(RankOptions(input_path=steps, output_path=str(tmp_path / "b.jsonl"),
                         model_id=critic_dir["path"], critic_type="vlm_regression",
                         screenshots_from=evaluated))
    with pytest.raises(ValueError, match="--no_use_ground_truth does not apply"):
        build_judge(JudgeOptions(critic_type="vlm_regression", model_id=critic_dir["path"],
                                 no_use_ground_truth=True))
    # a screenshot named in the file but gone from the disk
    gone = tmp_path / "gone.jsonl"
    gone.write_text(json.dumps({"task": {"ground_truth": page(0)},
                                "reference_screenshot": "nowhere.png"}) + "\n")
    judge = build_judge(JudgeOptions(critic_type="vlm_regression", model_id=critic_dir["path"]),
                        screenshots_from=str(gone))
    with pytest.raises(ValueError, match="nowhere.png .* not found"):
        judge.judge([StepSample.from_dict(step(0, [GOOD]))])
