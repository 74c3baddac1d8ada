"""The frontend's vision-language critic on its own (sweet_rl/training/vlm_heads.py): items
encoded as the processor encodes the whole message, a hand-set head's pooled score over visual
and text tokens, scores that padding never changes, the Bradley-Terry loss of a VLM batch, and
the pair file's checks."""

import json
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from sweet_rl.records import RecordError
from sweet_rl.training.vlm_heads import VLMCritic, VLMEncoder, VLMHeadModel, _load_image
from sweet_rl.training.vlm_pairs import read_vlm_pairs
from tests.training.helpers import BAD, GOOD
from tests.training.vlm_helpers import last_turn, picture, vlm_pairs


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory):
    from sweet_rl.models.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(str(tmp_path_factory.mktemp("tiny-qwen2-vl")), seed=0)


@pytest.fixture(scope="module")
def processor(tiny_vlm_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny_vlm_dir)


def whole_message(processor, image, text):
    """The processor's own encoding of the item's message (no cutting)."""
    message = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    rendered = processor.apply_chat_template(message, tokenize=False)
    return processor(text=[rendered], images=[_load_image(image)], return_tensors="pt",
                     add_special_tokens=False)


def test_items_are_the_processors_message_and_only_the_dialogue_is_cut(processor, tmp_path):
    image = picture(tmp_path / "page.png", "white", size=(150, 100))
    text = last_turn("def f", GOOD)
    whole = whole_message(processor, image, text)
    encoder = VLMEncoder(processor, max_len=256)
    item = encoder((image, text))
    assert item["input_ids"] == whole["input_ids"][0].tolist()
    assert torch.equal(item["pixel_values"], whole["pixel_values"])
    assert item["image_grid_thw"].tolist() == whole["image_grid_thw"].tolist()
    assert encoder.length((image, text)) == len(item["input_ids"])
    slots = item["input_ids"].count(encoder.image_token_id)
    assert slots == encoder.image_tokens(image) > 0  # from the picture's size alone

    # too long: the dialogue loses its start; the picture and the template stay whole
    short = VLMEncoder(processor, max_len=len(item["input_ids"]) - 5)
    cut = short((image, text))["input_ids"]
    assert len(cut) == short.max_len and cut.count(encoder.image_token_id) == slots
    head = len(short.frame(image)["head"])
    assert cut[:head] == item["input_ids"][:head] and cut[-9:] == item["input_ids"][-9:]
    with pytest.raises(ValueError, match="the picture and the template take"):
        VLMEncoder(processor, max_len=slots).length((image, text))
    # a page whose text names the image slot cannot make one
    sneaky = encoder((image, "<|image_pad|>" + text))["input_ids"]
    assert sneaky.count(encoder.image_token_id) == slots


def test_hand_set_head_scores_the_mean_over_visual_and_text_tokens(tiny_vlm_dir, processor,
                                                                   tmp_path):
    """weight = one-hot on hidden unit 3, no bias: an item's score is the mean, over all T
    positions of its message -- image slots included -- of unit 3 of the language model's
    last hidden states (after the final norm). Expected values come from the conditional
    generation model's own forward with ``output_hidden_states``, one item at a time (no
    padding): ``hidden_states[-1][0, :, 3].mean()``. The critic scores them batched with a
    longer item, so the short one is right-padded: padding must not count."""
    from transformers import Qwen2VLForConditionalGeneration

    from sweet_rl.training.heads import load_backbone

    small = picture(tmp_path / "small.png", "orange", size=(90, 80))
    large = picture(tmp_path / "large.png", "white", size=(200, 140))
    items = [(small, last_turn("def f", GOOD)), (large, last_turn("print list", BAD) * 3)]
    lm = Qwen2VLForConditionalGeneration.from_pretrained(tiny_vlm_dir).eval()
    expected = []
    with torch.no_grad():
        for image, text in items:
            inputs = whole_message(processor, image, text)
            last = lm(**inputs, output_hidden_states=True).hidden_states[-1]  # (1, T, H)
            expected.append(last[0, :, 3].mean().item())  # (T,) -> mean

    model = VLMHeadModel(load_backbone(tiny_vlm_dir), seed=0).eval()
    assert model.score_head.bias is None  # as the training fork's head
    with torch.no_grad():
        model.score_head.weight.zero_()
        model.score_head.weight[0, 3] = 1.0
    critic = VLMCritic(model, processor, max_len=512)
    together = critic.score([items[1], items[0], items[1]], batch_size=3)
    assert together == pytest.approx([expected[1], expected[0], expected[1]], abs=1e-5)
    alone = critic.score([items[0]])
    assert alone == pytest.approx([together[1]], abs=1e-5)
    lengths = [critic.encoder.length(item) for item in items]
    assert lengths[0] < lengths[1]  # the short item really was padded
    assert critic.score([]) == []


def test_bradley_terry_loss_of_a_vlm_batch_by_hand(processor, tmp_path):
    """Two hand-made pairs, batched as training batches them: rows 0-1 the chosen sides,
    rows 2-3 the rejected ones, each row's pixels in row order. A stand-in model gives the
    scores chosen (2, 0) and rejected (0, 1):

        pair 0: -log sigmoid(2 - 0) = log(1 + e^-2) = 0.126928
        pair 1: -log sigmoid(0 - 1) = log(1 + e^1)  = 1.313262
        loss = mean = 0.720095
    """
    from sweet_rl.training.head_trainer import (ScalarHeadTrainer, VLMPairCollator,
                                                VLMPairDataset)

    pairs = read_vlm_pairs(vlm_pairs(tmp_path, n=2))
    encoder = VLMEncoder(processor, max_len=256)
    dataset = VLMPairDataset(pairs, encoder)
    batch = VLMPairCollator(processor.tokenizer.pad_token_id, encoder.image_token_id)(
        [dataset[0], dataset[1]])
    grids = [encoder(item)["image_grid_thw"][0].tolist() for item in
             (pairs[0][0], pairs[1][0], pairs[0][1], pairs[1][1])]
    assert batch["image_grid_thw"].tolist() == grids  # chosen, chosen, rejected, rejected
    assert batch["pixel_values"].shape[0] == sum(t * h * w for t, h, w in grids)
    assert batch["mm_token_type_ids"].sum(dim=1).tolist() == [
        t * h * w // 4 for t, h, w in grids]  # image slots per row (2x2 patches a token)

    seen = {}

    def model(**inputs):
        seen.update(inputs)
        return torch.tensor([2.0, 0.0, 0.0, 1.0])

    model.training = True
    trainer = SimpleNamespace(kind="vlm_regression", _stored=defaultdict(list))
    loss = ScalarHeadTrainer.compute_loss(trainer, model, dict(batch, turn_ids=None))
    assert loss.item() == pytest.approx(0.720095, abs=1e-6)
    assert set(seen) == {"input_ids", "attention_mask", "pixel_values", "image_grid_thw",
                         "mm_token_type_ids"}  # the model's inputs only
    assert trainer._stored["accuracy"] == [0.5] and trainer._stored["margin"] == [0.5]


def test_bad_pair_files_name_the_file_the_line_and_the_field(tmp_path):
    path = vlm_pairs(tmp_path, n=2)
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    good = rows[0]

    def check(row, line_field):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
        with pytest.raises(RecordError) as err:
            read_vlm_pairs(str(bad))
        assert (err.value.path, err.value.line, err.value.field) == (str(bad), 2, line_field)
        return str(err.value)

    assert "not found" in check(dict(good, rejected={"image": "gone.png", "text": "x"}),
                                "rejected.image")
    check(dict(good, chosen={"image": good["chosen"]["image"]}), "chosen.text")
    check(dict(good, chosen="a text, not an item"), "chosen")
    check({"chosen": good["chosen"]}, "rejected")
    pairs = read_vlm_pairs(path)  # pictures resolved against the pair file's folder
    assert pairs[0][0][0] == str(tmp_path / "reference_0.png") == pairs[0][1][0]
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(RecordError, match="no pairs"):
        read_vlm_pairs(str(tmp_path / "empty.jsonl"))
