"""Recall drills: the user tells details in the scripted human's sentences, the agent writes
exactly those, in the reference's comment-then-constant layout; seeded; SFT-ready rows."""

import random
import re

from sweet_rl.recipes.mini.drills import MAX_TOLD, MIN_TOLD, REQUEST, build_drills, drill
from sweet_rl.recipes.mini.tasks import FAMILIES, generate_tasks
from sweet_rl.io import write_jsonl
from sweet_rl.simulators.scripted_simulator import hidden_details

DETAILS = {(d.name, d.says(v)): v for f in FAMILIES for d in f.details for v in d.options}


def test_the_agent_writes_what_it_was_told_in_the_references_layout():
    rng = random.Random(3)
    orders_differ = 0
    for _ in range(50):
        message, output = drill(rng)
        assert message.startswith(REQUEST)
        told = message[len(REQUEST):].strip()
        code = re.fullmatch(r"OUTPUT: ```python\n(.*)\n```", output, re.S).group(1)
        pairs = re.findall(r"^    # (.+)\n    ([A-Z]+) = (.+)$", code, re.M)
        assert MIN_TOLD <= len(pairs) <= MAX_TOLD
        for sentence, name, value in pairs:
            assert sentence in told and repr(DETAILS[(name, sentence)]) == value
        assert sum(told.count(sentence) for sentence, _, _ in pairs) == len(pairs)
        orders_differ += [s for s, _, _ in pairs] != sorted((s for s, _, _ in pairs),
                                                              key=told.index)
    assert orders_differ > 25  # the written order is shuffled against the told one


def test_a_one_family_drill_tells_each_of_its_details():
    rng = random.Random(5)
    for _ in range(10):
        message, output = drill(rng, ["late_fee"])
        names = re.findall(r"^    ([A-Z]+) = ", output, re.M)
        assert sorted(names) == ["CAP", "FEE", "GRACE"]
        assert "fee runs" in message and "discount" not in message


def test_a_drills_lines_are_what_a_reference_holds():
    # the comment-then-constant lines of a drill are those of some task's reference
    reference = generate_tasks(1, 0)[0].ground_truth
    lines = reference.splitlines()[1:3]
    sentence, value = lines[0][len("    # "):], lines[1].split(" = ")[1]
    assert hidden_details(reference)[0][1] == sentence and value.isdigit()


def test_rows_are_seeded_and_train_as_sft(tiny_model_dir, tmp_path):
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.training.data import read_sft_examples
    from sweet_rl.training.collators import SequenceTokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    rows = build_drills(tokenizer, 4, seed=1)
    assert [r.to_dict() for r in rows] == [r.to_dict() for r in build_drills(tokenizer, 4, 1)]
    assert [r.to_dict() for r in rows] != [r.to_dict() for r in build_drills(tokenizer, 4, 2)]
    turn = rows[0].dialogue_history[-1]
    assert turn.input.startswith(tokenizer.bos_token) and turn.input.endswith(
        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert rows[0].reward == 1.0 and rows[0].task.extra["mini_style"] == "drill"
    path = tmp_path / "drills.jsonl"
    write_jsonl(str(path), rows)
    # the SFT stage reads them, and only the agent's message is trained on
    seq = SequenceTokenizer(tokenizer, 1024, "<|start_header_id|>assistant<|end_header_id|>")
    examples = read_sft_examples(str(path), seq, min_reward=0.0)
    assert len(examples) == 4
    ids, turns = examples[0]["sequence"].input_ids, examples[0]["sequence"].turn_ids
    trained = [i for i, t in zip(ids, turns) if t]
    assert tokenizer.decode(trained).startswith("\n\n" + rows[0].dialogue_history[-1].output)
