"""Rows hold text an answer chose (its own text, the names of its classes, what its outputs look
like), and some Python strings have no UTF-8 form: a lone surrogate (``chr(0xD800)``). The row
writer (sweet_rl.io) must write every such row, as valid UTF-8 JSON, and read it back the same.
"""

import json

from sweet_rl.io import append_jsonl, read_jsonl, write_jsonl

LONE = chr(0xD800)
ROW = {
    "answer": f"prose {LONE} then code",
    "grader_tests": ["pass", "error:Failure"],
    "test_results": [{"test": "probe(0)", "passed": False, "expected": "0",
                      "got": f"<opaque N{chr(0xDC80)}>"}],
    f"key{chr(0xDFFF)}": [f"{LONE}{LONE}", "\\" + LONE, "é and 日本 stay readable"],
}


def test_a_row_with_lone_surrogates_is_written_as_utf8_json_and_reads_back_the_same(tmp_path):
    path = tmp_path / "rows.jsonl"
    assert write_jsonl(str(path), [ROW, {"plain": "row"}]) == 2
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # strict UTF-8: no surrogate was written raw
    assert "\\ud800" in text and "\\udc80" in text and "\\udfff" in text
    assert "é and 日本 stay readable" in text  # other text is not escaped
    assert read_jsonl(str(path)) == [ROW, {"plain": "row"}]
    # each line is valid JSON by itself, as every JSON reader sees it
    assert [json.loads(line) for line in raw.splitlines()] == [ROW, {"plain": "row"}]


def test_appended_rows_with_lone_surrogates_read_back_the_same(tmp_path):
    path = tmp_path / "pending.jsonl"
    append_jsonl(str(path), [ROW])
    append_jsonl(str(path), [{"again": LONE}])
    assert read_jsonl(str(path)) == [ROW, {"again": LONE}]


def test_a_high_surrogate_before_a_low_one_reads_back_as_the_character_they_encode(tmp_path):
    # JSON's rule: the escaped pair "\\ud83d\\ude00" is one character, U+1F600
    path = tmp_path / "pair.jsonl"
    write_jsonl(str(path), [{"text": "\ud83d\ude00"}])
    assert read_jsonl(str(path)) == [{"text": "\U0001F600"}]
