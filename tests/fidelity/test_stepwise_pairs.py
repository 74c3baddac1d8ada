"""The pair stage writes the original's file (generate_random_pairs_from_ranks.py).

The original, per ranked turn in file order and per pair: ``np.argsort(judge_result)``
ascending; ``random.choice`` over the LOW positions ``range(N // 2)``, then over the HIGH
positions ``range(N // 2, N)``; the candidate with the larger judge_result is chosen (on a
tie, the high-half draw); after all turns ``random.shuffle`` of the whole list with the same
generator (``random.seed(42)`` at import); lines ``json.dumps({"chosen": out + eos,
"rejected": out + eos, "prompt": input})``, or ``{"chosen": input + out + eos, "rejected":
...}`` with ``--no_prompt``. Ours drops identical-text pairs after the shuffle.
"""

import json
import subprocess
import sys

from sweet_rl.stages.pairs import PairsOptions, pairs
from tests.conftest import REPO_ROOT

EOT = "<|eot_id|>"  # the tiny tokenizer's eos, as Llama-3.1-Instruct's


def _ranked(path):
    def row(prompt, outputs, judge):
        n = len(outputs)
        return {"input": prompt, "input_with_ground_truth": "gt." + prompt, "older_output": "o",
                "reward": 1.0, "ground_truth": "gt", "messages": [],
                "additional_outputs": outputs, "additional_reference_logprobs": [0.0] * n,
                "additional_reference_logprobs_sum": [0.0] * n, "judge_result": judge}

    rows = [
        # tie case, N = 4: ascending stable order [0, 1, 2, 3]; low {a0, a1}, high {a2, a3}
        row("P0 \u00e9", ["a0", "a1", "a2", "a3"], [0.5, 0.5, 0.5, 1.0]),
        # odd N = 3: order [1, 2, 0]; low = first 3 // 2 = 1 position {b1}; high {b2, b0}:
        # the middle candidate b2 is on the chosen side
        row("P1", ["b0", "b1", "b2"], [1.0, -2.0, 0.0]),
        # identical texts: every pair is dropped
        row("P2", ["same", "same"], [0.1, 0.2]),
    ]
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)


# Walking random.Random(42) (choice(seq) = seq[_randbelow(len(seq))]), num_pairs = 2:
#   P0 pair 1: _randbelow(2) = 0 -> low a0, _randbelow(2) = 0 -> high a2; 0.5 == 0.5, tie ->
#              chosen a2 (high draw), rejected a0                          [draw 0]
#   P0 pair 2: _randbelow(2) = 1 -> low a1, _randbelow(2) = 0 -> high a2; tie -> a2 over a1  [1]
#   P1 pair 1: _randbelow(1) = 0 -> b1, _randbelow(2) = 0 -> b2 (judge 0.0 > -2.0): b2 over b1  [2]
#   P1 pair 2: the same draws: b2 over b1                                  [3]
#   P2 pairs:  _randbelow(1) twice per pair: same / same                   [4], [5]
#   (each _randbelow(1) still consumes getrandbits(1), so it is walked, not skipped)
# shuffle of [0..5]: i=5 j=1, i=4 j=1, i=3 j=0, i=2 j=2, i=1 j=0 -> [4, 3, 2, 0, 5, 1];
# dropping the identical 4 and 5 leaves 3, 2, 0, 1. json.dumps escapes the non-ASCII e.
EXPECTED = (
    '{"chosen": "b2<|eot_id|>", "rejected": "b1<|eot_id|>", "prompt": "P1"}\n'
    '{"chosen": "b2<|eot_id|>", "rejected": "b1<|eot_id|>", "prompt": "P1"}\n'
    '{"chosen": "a2<|eot_id|>", "rejected": "a0<|eot_id|>", "prompt": "P0 \\u00e9"}\n'
    '{"chosen": "a2<|eot_id|>", "rejected": "a1<|eot_id|>", "prompt": "P0 \\u00e9"}\n'
)
EXPECTED_NO_PROMPT = (
    '{"chosen": "P1b2<|eot_id|>", "rejected": "P1b1<|eot_id|>"}\n'
    '{"chosen": "P1b2<|eot_id|>", "rejected": "P1b1<|eot_id|>"}\n'
    '{"chosen": "P0 \\u00e9a2<|eot_id|>", "rejected": "P0 \\u00e9a0<|eot_id|>"}\n'
    '{"chosen": "P0 \\u00e9a2<|eot_id|>", "rejected": "P0 \\u00e9a1<|eot_id|>"}\n'
)


def test_stepwise_pairs_literal_output_seed_42(tmp_path, tiny_model_dir, capsys):
    ranked = _ranked(tmp_path / "ranked.jsonl")
    out = str(tmp_path / "pairs.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=out, num_pairs=2,
                       tokenizer=tiny_model_dir))  # seed 42
    with open(out, "rb") as handle:
        assert handle.read() == EXPECTED.encode("ascii")
    assert "4 pairs from 3 turns (2 identical-text pairs dropped)" in capsys.readouterr().out


# the stage's script end to end in a subprocess (under a second: it reads the eos token from
# the tokenizer's files and imports no torch)
def test_stepwise_pairs_no_prompt_through_the_script(tmp_path, tiny_model_dir):
    ranked = _ranked(tmp_path / "ranked.jsonl")
    out = tmp_path / "pairs.jsonl"
    result = subprocess.run([sys.executable, "scripts/generate_random_pairs_from_ranks.py", ranked,
                             str(out), "--num_pairs", "2", "--no_prompt", "--tokenizer",
                             tiny_model_dir], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.read_bytes() == EXPECTED_NO_PROMPT.encode("ascii")


def test_stepwise_pairs_defaults_are_the_originals(tmp_path, tiny_model_dir):
    """--num_pairs 8 and --seed 42 by default: 3 turns x 8 draws, the 16 P2 ones dropped."""
    ranked = _ranked(tmp_path / "ranked.jsonl")
    default, explicit = str(tmp_path / "d.jsonl"), str(tmp_path / "e.jsonl")
    pairs(PairsOptions(input_path=ranked, output_path=default, tokenizer=tiny_model_dir))
    pairs(PairsOptions(input_path=ranked, output_path=explicit, num_pairs=8, seed=42,
                       tokenizer=tiny_model_dir))
    with open(default, "rb") as a, open(explicit, "rb") as b:
        lines = a.read()
        assert lines == b.read()
    rows = [json.loads(line) for line in lines.splitlines()]
    assert len(rows) == 16
    # every P1 pair prefers the middle candidate b2 or b0 (high half) over b1 (the low half)
    assert {(r["chosen"], r["rejected"]) for r in rows if r["prompt"] == "P1"} <= {
        ("b2" + EOT, "b1" + EOT), ("b0" + EOT, "b1" + EOT)}
