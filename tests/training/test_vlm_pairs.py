"""The VLM critic's pairs as evaluate_html.py --vlm_preference_path writes them: the text
critic's pairs (same rule, same order), each side the row's reference screenshot and the last
agent turn's input + output, read back by train_dpo's reader. No browser: the reference
screenshots and the answers are pictures on disk (answers in the original's layout, a
screenshot path), scored by a randomly initialised CLIP."""

import json
import os

import pytest

from sweet_rl.training.vlm_pairs import read_vlm_pairs, write_vlm_pairs
from sweet_rl.types import GROUND_TRUTH_PREFIX
from tests.training.vlm_helpers import picture

CLIP = dict(clip_pretrained="none", seed=0, device="cpu", batch_size=8)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def evaluated_run(folder):
    """Two tasks x two rollouts (row i + 2j: rollout j of task i). Each task's first-played
    good rollout answers with a copy of its reference picture (reward 1.0), the other with
    "No answer" (scored black): one pair per task, the good rollout chosen."""
    shots = folder / "shots"
    shots.mkdir(parents=True)
    rows = []
    for rollout in range(2):
        for task in range(2):
            reference = picture(shots / f"reference_{task}.png", ["white", "khaki"][task],
                                box=(10, 10 + 30 * task, 90, 40 + 30 * task), size=(160, 120))
            good = rollout == task  # task 0: rollout 0 is good; task 1: rollout 1
            answer = "No answer"
            if good:
                answer = f"answer_{task}.png"
                picture(folder / answer, ["white", "khaki"][task],
                        box=(10, 10 + 30 * task, 90, 40 + 30 * task), size=(160, 120))
            tag = f"t{task}r{rollout}"
            rows.append({
                "task": {"problem_description": f"page {task}",
                         "ground_truth": f"<html><body>page {task}</body></html>"},
                "dialogue_history": [
                    {"role": "user", "content": f"page {task}"},
                    {"role": "assistant", "content": "?", "input": f"<in {tag} 1>",
                     "output": f"<out {tag} 1>"},
                    {"role": "user", "content": "yes"},
                    {"role": "assistant", "content": "!", "input": f"<in {tag} 2>",
                     "output": f"<out {tag} 2>"}],
                "answer": answer,
                "reference_screenshot": os.path.relpath(reference, folder)})
    path = folder / "run.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_evaluate_html_writes_the_text_critics_pairs_with_the_reference_picture(tmp_path,
                                                                                capsys):
    pytest.importorskip("open_clip")
    from sweet_rl.stages.evaluate_html import EvaluateHtmlOptions, evaluate_html

    run = evaluated_run(tmp_path / "run")
    out = tmp_path / "pairs"
    metrics = evaluate_html(EvaluateHtmlOptions(saved_path=run, k=2,
                                                preference_path=str(out / "text.jsonl"),
                                                ground_truth_preference_path=str(out / "gt.jsonl"),
                                                vlm_preference_path=str(out / "vlm.jsonl"), **CLIP))
    rows = read(run)
    assert [r["reward"] for r in rows][0] == 1.0 and rows[3]["reward"] == 1.0
    assert metrics["pairs"] == 2 and metrics["rendered"] == 0

    text, vlm = read(out / "text.jsonl"), read(out / "vlm.jsonl")
    # rows 0 and 3 are the good rollouts: pairs (0, 2) for task 0 and (3, 1) for task 1
    assert text == [{"chosen": "<in t0r0 2><out t0r0 2>", "rejected": "<in t0r1 2><out t0r1 2>"},
                    {"chosen": "<in t1r1 2><out t1r1 2>", "rejected": "<in t1r0 2><out t1r0 2>"}]
    assert vlm == [{side: {"image": os.path.join("..", "run", "shots", f"reference_{task}.png"),
                           "text": pair[side]} for side in ("chosen", "rejected")}
                   for task, pair in enumerate(text)]
    # the text critic's pairs are the same texts behind the reference HTML
    prefix = [GROUND_TRUTH_PREFIX.format(ground_truth=f"<html><body>page {t}</body></html>")
              for t in (0, 1)]
    assert read(out / "gt.jsonl") == [{side: prefix[t] + pair[side] for side in pair}
                                      for t, pair in enumerate(text)]
    sidecar = json.loads((out / "vlm.jsonl.config.json").read_text())
    assert sidecar["stages"]["evaluate_html"]["vlm_preference_path"] == str(out / "vlm.jsonl")

    # what train_dpo reads: absolute pictures, the same texts
    pairs = read_vlm_pairs(str(out / "vlm.jsonl"))
    assert pairs[1][0] == (str(tmp_path / "run" / "shots" / "reference_1.png"), text[1]["chosen"])

    # alone, the option still prints the original's pair count (nothing is scored again)
    again = evaluate_html(EvaluateHtmlOptions(saved_path=run, k=2,
                                              vlm_preference_path=str(out / "again.jsonl"), **CLIP))
    assert again["evaluated"] == 0 and read(out / "again.jsonl") == vlm
    assert capsys.readouterr().out.strip().splitlines()[-1] == "Number of preference pairs: 2"


def test_a_pair_without_a_reference_screenshot_is_left_out(tmp_path, caplog):
    from sweet_rl.records import Trajectory

    run = evaluated_run(tmp_path / "run")
    trajectories = [Trajectory.from_dict(row) for row in read(run)]
    trajectories[3].extra.pop("reference_screenshot")  # its reference failed to render
    with caplog.at_level("WARNING"):
        written = write_vlm_pairs(str(tmp_path / "vlm.jsonl"), trajectories, [(0, 2), (3, 1)],
                                  run, {})
    assert written == 1 and len(read(tmp_path / "vlm.jsonl")) == 1
    assert "1 pair(s) left out" in caplog.text and "rows [4]" in caplog.text
