"""Pictures and VLM critic pairs for the vision-language critic's tests (no model needed)."""

import json
import os

from tests.training.helpers import BAD, GOOD, QUESTIONS, dialogue

COLOURS = ["white", "orange", "lightgreen", "pink", "lightblue", "khaki"]
# the tiny Qwen2-VL makes these 9, 16, 12 and 16 image tokens (at most 16: its max_pixels)
SIZES = [(90, 80), (112, 112), (120, 90), (224, 56)]


def picture(path, colour, box=(5, 5, 40, 30), size=(120, 90)):
    """A page screenshot stand-in drawn with Pillow: a coloured page with a navy block."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, colour)
    ImageDraw.Draw(image).rectangle(box, fill="navy")
    image.save(path)
    return str(path)


def last_turn(question, answer):
    """What a VLM pair's text holds: the dialogue as the last agent turn saw and wrote it
    (chat-formatted input, then the raw output without an end-of-turn token)."""
    return dialogue(question, "What x?", "x is 1", answer, eot_last=False)


def vlm_pairs(folder, n=4):
    """``n`` (at most 4) tasks, each with its own reference picture (of its own size, so the
    rows of a batch have different numbers of image tokens); the answer is always chosen over
    the refusal. Pictures are stored relative to the pair file, as evaluate_html writes
    them."""
    os.makedirs(folder, exist_ok=True)
    rows = []
    for i, question in enumerate(QUESTIONS[:n]):
        name = f"reference_{i}.png"
        picture(os.path.join(folder, name), COLOURS[i], size=SIZES[i])
        rows.append({"chosen": {"image": name, "text": last_turn(question, GOOD)},
                     "rejected": {"image": name, "text": last_turn(question, BAD)}})
    path = os.path.join(folder, "vlm_pairs.jsonl")
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path
