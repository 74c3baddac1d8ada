"""Tokenisation, masks and collators against literal tensors for a two-turn dialogue (trl style).

The dialogue uses one-character messages, so each message is exactly one token whatever the
tiny tokenizer's merges are; the only multi-token pieces are the role names, spelled out as
``U`` (the ids of "user") and ``A`` (the ids of "assistant"), each a standalone pre-token
between special tokens. Special-token ids are fixed by ``SPECIAL_TOKENS`` in tiny_model:
<|begin_of_text|> 0, <|start_header_id|> 2, <|end_header_id|> 3, <|eot_id|> 4, <|pad|> 5.
"""

import pytest
import torch

from sweet_rl.training.collators import (PreferenceCollator, SequenceTokenizer, SFTCollator,
                                     common_prefix_length, find_all, template_turn_ids,
                                     truncate_left)

TEMPLATE = "<|start_header_id|>assistant<|end_header_id|>"
BOS, HS, HE, EOT, PAD = 0, 2, 3, 4, 5


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def chat(tok, *messages):
    roles = ["user", "assistant"] * len(messages)
    return tok.apply_chat_template([{"role": r, "content": m} for r, m in zip(roles, messages)],
                                   tokenize=False)


@pytest.fixture(scope="module")
def ids(tok):
    """Token ids of the pieces: role names, newline, and the one-letter messages."""
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    pieces = {name: enc(name) for name in ["user", "assistant"]}
    pieces.update({ch: enc(ch)[0] for ch in "\nqarbc"})
    assert all(len(enc(ch)) == 1 for ch in "\nqarbc")
    assert [BOS, HS, HE, EOT, PAD] == tok.convert_tokens_to_ids(
        ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|pad|>"])
    return pieces


def two_turn_expected(ids):
    """user "q", assistant "a", user "r", assistant "b" -- the expected ids and turn ids:

        <bos> <hs> U <he> \\n \\n q <eot> <hs> A <he> [\\n \\n a <eot>] <hs> U <he> \\n \\n r <eot>
        <hs> A <he> {\\n \\n b <eot>}
    [...] is turn 1, {...} turn 2: from after the template through <|eot_id|>.
    """
    U, A, NL = ids["user"], ids["assistant"], ids["\n"]
    user = lambda m: [HS, *U, HE, NL, NL, ids[m], EOT]  # noqa: E731
    head = [HS, *A, HE]
    input_ids = (
        [BOS]
        + user("q")
        + head
        + [NL, NL, ids["a"], EOT]
        + user("r")
        + head
        + [NL, NL, ids["b"], EOT]
    )
    turn_ids = ([0] * (1 + 7 + len(head)) + [1] * 4 + [0] * (7 + len(head)) + [2] * 4)
    return input_ids, turn_ids


def test_template_selects_every_assistant_turn(tok, ids):
    seq = SequenceTokenizer(tok, max_len=512, response_template=TEMPLATE)
    out = seq.single(chat(tok, "q", "a", "r", "b"))
    expected_ids, expected_turns = two_turn_expected(ids)
    assert out.input_ids == expected_ids
    assert out.turn_ids == expected_turns
    assert out.num_loss_tokens == 8


def test_template_helpers_on_literal_ids():
    """Template [7, 8] at 1 and 6; end id 4. Turn 1 = positions 3..5 (ends at the 4),
    turn 2 = position 8 to the end (no end token: the original's critic texts)."""
    ids = [1, 7, 8, 9, 9, 4, 7, 8, 9, 9]
    assert find_all(ids, [7, 8]) == [1, 6]
    assert template_turn_ids(ids, [7, 8], end_id=4) == [0, 0, 0, 1, 1, 1, 0, 0, 2, 2]


def test_left_truncation_keeps_bos_and_the_final_response(tok, ids):
    """max_len 12: <bos> + the last 11 tokens; context and turn 1 go first, turn 2 stays.

    Expected: [BOS] + expected_ids[-11:], turn ids [0] + expected_turns[-11:] (the final
    ``<hs> A <he> \n \n b <eot>`` and what precedes it up to 11 tokens).
    """
    expected_ids, expected_turns = two_turn_expected(ids)
    seq = SequenceTokenizer(tok, max_len=12, response_template=TEMPLATE)
    out = seq.single(chat(tok, "q", "a", "r", "b"))
    assert out.input_ids == [BOS] + expected_ids[-11:]
    assert out.turn_ids == [0] + expected_turns[-11:]
    assert out.turn_ids[-4:] == [2, 2, 2, 2] and seq.lost_responses == 0


def test_too_long_final_response_keeps_its_end(tok, ids):
    """max_len 3 < the 4-token final turn: <bos> + its last two tokens (b <eot>), counted."""
    seq = SequenceTokenizer(tok, max_len=3, response_template=TEMPLATE)
    out = seq.single(chat(tok, "q", "a", "r", "b"))
    assert out.input_ids == [BOS, ids["b"], EOT]
    assert out.turn_ids == [0, 2, 2]
    assert seq.lost_responses == 1
    # no leading BOS: just the last max_len tokens; lost only when the final turn is cut
    assert truncate_left([9, 1, 2], [0, 1, 1], 2, bos_id=0) == ([1, 2], [1, 1], False)
    assert truncate_left([9, 1, 2], [0, 1, 1], 1, bos_id=0) == ([2], [1], True)


def test_pair_without_prompt_uses_the_common_token_prefix(tok, ids):
    """chosen ends "... assistant\\n\\n a <eot>", rejected "... assistant\\n\\n c <eot>":
    the prefix shared up to the answer is the prompt; the answer and <eot> are trained."""
    chosen_text, rejected_text = chat(tok, "q", "a"), chat(tok, "q", "c")
    seq = SequenceTokenizer(tok, max_len=512)
    chosen, rejected = seq.pair(chosen_text, rejected_text)
    n = len(chosen.input_ids) - 2
    assert chosen.input_ids[n:] == [ids["a"], EOT] and rejected.input_ids[n:] == [ids["c"], EOT]
    assert chosen.turn_ids == [0] * n + [1, 1] and rejected.turn_ids == [0] * n + [1, 1]
    # identical sides still train on their last token; empty sides have no prefix
    assert common_prefix_length([1, 2, 3], [1, 2, 3]) == 2
    assert common_prefix_length([1, 2], [3]) == 0


def test_pair_with_prompt_and_template(tok, ids):
    """A "prompt" key: the response only, tokenised separately. With a template too, the
    templated turns inside the prompt are not trained; the response after it is."""
    prompt = chat(tok, "q", "a", "r") + TEMPLATE + "\n\n"
    seq = SequenceTokenizer(tok, max_len=512)
    chosen, rejected = seq.pair("b<|eot_id|>", "c<|eot_id|>", prompt=prompt)
    n = len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert chosen.input_ids[n:] == [ids["b"], EOT] and chosen.turn_ids == [0] * n + [1, 1]
    templated = SequenceTokenizer(tok, max_len=512, response_template=TEMPLATE)
    chosen, _ = templated.pair("b<|eot_id|>", "c<|eot_id|>", prompt=prompt)
    assert chosen.turn_ids == [0] * n + [2, 2]  # turn 1 ("a") lies in the prompt


def test_preference_collator_pads_and_stacks(tok, ids):
    """Chosen: the two-turn dialogue (L tokens). Rejected: user "q", assistant "c" (M < L).
    Rows: [chosen, rejected]; rejected padded with <|pad|> = 5, attention 0, turn 0."""
    seq = SequenceTokenizer(tok, max_len=512, response_template=TEMPLATE)
    chosen, rejected = seq.pair(chat(tok, "q", "a", "r", "b"), chat(tok, "q", "c"))
    expected_ids, expected_turns = two_turn_expected(ids)
    L, M = len(expected_ids), len(rejected.input_ids)
    assert rejected.input_ids == expected_ids[:M - 2] + [ids["c"], EOT]
    batch = PreferenceCollator(pad_id=PAD)([{"chosen": chosen, "rejected": rejected,
                                             "ref_chosen_logp": -1.5, "ref_rejected_logp": -2.5}])
    assert batch["input_ids"].tolist() == [expected_ids, rejected.input_ids + [PAD] * (L - M)]
    assert batch["attention_mask"].tolist() == [[1] * L, [1] * M + [0] * (L - M)]
    assert batch["turn_ids"].tolist() == [expected_turns, expected_turns[:M] + [0] * (L - M)]
    assert batch["loss_mask"].tolist() == [
        [int(t > 0) for t in row] for row in batch["turn_ids"].tolist()
    ]
    assert batch["ref_logps"].tolist() == [-1.5, -2.5]
    assert torch.equal(batch["input_ids"][1, M:], torch.full((L - M,), PAD))


def test_sft_collator_labels_only_assistant_turns(tok, ids):
    """labels = input ids on the 8 assistant-turn tokens, -100 elsewhere (and on padding)."""
    seq = SequenceTokenizer(tok, max_len=512, response_template=TEMPLATE)
    long, short = seq.single(chat(tok, "q", "a", "r", "b")), seq.single(chat(tok, "q", "c"))
    expected_ids, expected_turns = two_turn_expected(ids)
    batch = SFTCollator(pad_id=PAD)([{"sequence": long}, {"sequence": short}])
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["labels"][0].tolist() == [
        i if t else -100 for i, t in zip(expected_ids, expected_turns)
    ]
    M = len(short.input_ids)
    assert batch["labels"][1].tolist() == [-100] * (M - 4) + [
        ids["\n"],
        ids["\n"],
        ids["c"],
        EOT,
    ] + [-100] * (len(expected_ids) - M)


class LetterTokenizer:
    """A stub tokenizer with literal ids: <B> 0 (BOS), <H> 2, </H> 3, <E> 4 (end of turn),
    <P> 5 (pad); every other character is its code point (u 117, a 97, q 113, r 114, x 120,
    y 121, z 122)."""

    SPECIAL = {"<B>": 0, "<H>": 2, "</H>": 3, "<E>": 4, "<P>": 5}
    bos_token_id, eos_token_id, pad_token_id, eos_token = 0, 4, 5, "<E>"

    def __call__(self, text, add_special_tokens=False):
        import re

        pieces = re.split("(" + "|".join(map(re.escape, self.SPECIAL)) + ")", text)
        ids = [self.SPECIAL[p] if p in self.SPECIAL else ord(c) for p in pieces if p
               for c in ([p] if p in self.SPECIAL else p)]
        return {"input_ids": ids}


def test_two_turn_pair_to_literal_tensors():
    """Chosen: user q / assistant x / user r / assistant y; rejected: ... / assistant z z.
    Template "<H>a</H>" = [2, 97, 3]; each assistant turn runs from after it through <E>.

        chosen   <B> <H> u </H> q <E> <H> a </H> [x <E>] <H> u </H> r <E> <H> a </H> {y <E>}
        rejected <B> <H> u </H> q <E> <H> a </H> [x <E>] <H> u </H> r <E> <H> a </H> {z z <E>}
    [..] turn 1, {..} turn 2. One pair -> rows [chosen, rejected], chosen padded with 5.
    """
    user, head = lambda m: [2, 117, 3, ord(m), 4], [2, 97, 3]  # noqa: E731
    chosen_text = "<B><H>u</H>q<E><H>a</H>x<E><H>u</H>r<E><H>a</H>y<E>"
    rejected_text = "<B><H>u</H>q<E><H>a</H>x<E><H>u</H>r<E><H>a</H>zz<E>"
    seq = SequenceTokenizer(LetterTokenizer(), max_len=64, response_template="<H>a</H>")
    chosen, rejected = seq.pair(chosen_text, rejected_text)
    assert chosen.input_ids == [0] + user("q") + head + [120, 4] + user("r") + head + [121, 4]
    batch = PreferenceCollator(pad_id=5)([{"chosen": chosen, "rejected": rejected,
                                           "ref_chosen_logp": -3.0, "ref_rejected_logp": -4.5}])
    assert torch.equal(batch["input_ids"], torch.tensor([
        [0, 2, 117, 3, 113, 4, 2, 97, 3, 120, 4, 2, 117, 3, 114, 4, 2, 97, 3, 121, 4, 5],
        [0, 2, 117, 3, 113, 4, 2, 97, 3, 120, 4, 2, 117, 3, 114, 4, 2, 97, 3, 122, 122, 4]]))
    assert torch.equal(batch["attention_mask"], torch.tensor([[1] * 21 + [0], [1] * 22]))
    assert torch.equal(batch["turn_ids"], torch.tensor([
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2]]))
    assert torch.equal(batch["loss_mask"], (batch["turn_ids"] > 0).long())
    assert torch.equal(batch["ref_logps"], torch.tensor([-3.0, -4.5]))

    # without the template: the response after the longest common token prefix (19 tokens)
    chosen, rejected = SequenceTokenizer(LetterTokenizer(), max_len=64).pair(
        chosen_text, rejected_text
    )
    assert chosen.turn_ids == [0] * 19 + [1, 1] and rejected.turn_ids == [0] * 19 + [1, 1, 1]

    # max_len 8: <B> + the last 7 tokens; the first turn and the context go, turn 2 stays whole
    chosen, rejected = SequenceTokenizer(
        LetterTokenizer(), max_len=8, response_template="<H>a</H>"
    ).pair(chosen_text, rejected_text)
    assert chosen.input_ids == [0, 114, 4, 2, 97, 3, 121, 4]
    assert chosen.turn_ids == [0, 0, 0, 0, 0, 0, 2, 2]
    assert rejected.input_ids == [0, 4, 2, 97, 3, 122, 122, 4]
    assert rejected.turn_ids == [0, 0, 0, 0, 0, 2, 2, 2]
