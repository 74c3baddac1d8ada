"""Small data files for the training tests (no model needed to build them)."""

import json
import os

HEADER = "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
TEMPLATE = "<|start_header_id|>assistant<|end_header_id|>"
QUESTIONS = ["def f", "return x", "print list", "import len", "while True", "range len"]
GOOD, BAD = "I WANT TO ANSWER: def f", "I don't know."


def dialogue(*messages, eot_last=True):
    """Chat-formatted text of alternating user/assistant messages (Llama-3 layout)."""
    roles = ["user", "assistant"] * len(messages)
    text = "<|begin_of_text|>" + "".join(
        HEADER.format(role=r, content=m) for r, m in zip(roles, messages)
    )
    return text if eot_last else text[:-len("<|eot_id|>")]


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return str(path)


def single_turn_pairs(path, n=4):
    """Learnable pairs: the same answer is always chosen over the same refusal."""
    return write_jsonl(path, [{"chosen": dialogue(q, GOOD), "rejected": dialogue(q, BAD)}
                              for q in QUESTIONS[:n]])


def critic_pairs(path, n=4):
    """Two-turn trajectories with a ground-truth prefix, like evaluate's critic pairs (the last
    turn ends without <|eot_id|>, as the original's input + output)."""
    rows = []
    for q in QUESTIONS[:n]:
        prefix = f"In light that the final answer is: {q}."
        rows.append({"chosen": prefix + dialogue(q, "What x?", "x is 1", GOOD, eot_last=False),
                     "rejected": prefix + dialogue(q, "What x?", "x is 1", BAD, eot_last=False)})
    return write_jsonl(path, rows)


def trajectories(path):
    """Evaluated trajectories: two successful (reward 1.0), one failed (0.0)."""
    rows = []
    for q, reward, answer in [
        ("def f", 1.0, GOOD),
        ("return x", 1.0, GOOD),
        ("print list", 0.0, BAD),
    ]:
        prompt = dialogue(q, "What x?", "x is 1") + TEMPLATE + "\n\n"
        rows.append(
            {
                "task": {"problem_description": q, "ground_truth": "def f(): return 1"},
                "dialogue_history": [
                    {"role": "user", "content": q},
                    {
                        "role": "assistant",
                        "content": "What x?",
                        "input": dialogue(q) + TEMPLATE + "\n\n",
                        "output": "What x?",
                    },
                    {"role": "user", "content": "x is 1"},
                    {"role": "assistant", "content": answer, "input": prompt, "output": answer},
                ],
                "answer": answer,
                "reward": reward,
            }
        )
    return write_jsonl(path, rows)
