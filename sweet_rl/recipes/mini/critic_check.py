"""Stage (diagnostic): how well a critic's ranking of per-turn candidates agrees with an oracle,
on the miniature ColBench (sweet_rl/recipes/mini/tasks.py) where the best action is known.

    sweet-rl mini critic_check outputs/mini_repro/seed0/ranked_sweet.jsonl

Reads ranked step records (``rank_best_of_n`` output: ``messages``, ``ground_truth``,
``additional_outputs``, ``judge_result``) and gives every candidate an oracle value from the
task's reference and the dialogue so far, with the scripted human's own rules:

* an answer (``I WANT TO ANSWER:``) whose code is the reference's, comments and blank lines
  aside: 3 (the task is solved);
* a question: the number of hidden details it makes the human tell that were not told yet
  (0, 1 or 2: a question about nothing, or about what is known, wastes a turn);
* any other answer: -1 (the dialogue ends unsolved).

It prints the critic's pairwise accuracy (over candidate pairs of one turn with different
oracle values and different judge results: the share the critic orders as the oracle does;
0.5 is chance) and the mean oracle value of the critic's top pick beside a random pick's and
the best candidate's. Nothing is executed: answers are compared as text.
"""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from sweet_rl.flags import Options, flag

ANSWER_MARK = "I WANT TO ANSWER"
SOLVED, WRONG_ANSWER = 3, -1
_CODE = re.compile(r"```(?:python)?\n(.*?)(?:```|$)", re.S)


def code_lines(text: str) -> Optional[List[str]]:
    """The code of a reply's first code block (or of a bare function), stripped lines without
    comments or blanks; None when there is none."""
    block = _CODE.search(text)
    code = block.group(1) if block else text[text.find("def "):] if "def " in text else None
    if code is None:
        return None
    return [line.strip() for line in code.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def oracle_value(candidate: str, reference: str, told: str) -> int:
    """The candidate's value (see the module docstring); ``told``: the human's replies so far."""
    from sweet_rl.simulators.scripted_simulator import MAX_DETAILS, hidden_details, names

    if ANSWER_MARK in candidate:
        return SOLVED if code_lines(candidate) == code_lines(reference) else WRONG_ANSWER
    question = candidate.split("OUTPUT:")[-1]
    answered = [sentence for keyword, sentence in hidden_details(reference)
                if names(question, keyword)][:MAX_DETAILS]
    return sum(sentence not in told for sentence in answered)


def turn_values(record: Dict) -> List[int]:
    told = " ".join(m["content"] for m in record["messages"][:-1] if m.get("role") == "user")
    return [oracle_value(c, record["ground_truth"], told) for c in record["additional_outputs"]]


def agreement(values: Sequence[Sequence[int]], judges: Sequence[Sequence[float]],
              seed: int = 0) -> Dict[str, float]:
    """Pairwise accuracy and the top / random / best pick's mean value over turns."""
    right = total = 0
    top, chance, best = [], [], []
    rng = random.Random(seed)
    for value, judge in zip(values, judges):
        for a in range(len(value)):
            for b in range(a + 1, len(value)):
                if value[a] != value[b] and judge[a] != judge[b]:
                    total += 1
                    right += (value[a] > value[b]) == (judge[a] > judge[b])
        top.append(value[max(range(len(judge)), key=judge.__getitem__)])
        chance.append(value[rng.randrange(len(value))])
        best.append(max(value))
    return {"pairwise_accuracy": right / total if total else float("nan"), "pairs": total,
            "turns": len(top), "top_pick": statistics.mean(top),
            "random_pick": statistics.mean(chance), "best_pick": statistics.mean(best)}


@dataclass(kw_only=True)
class CriticCheckOptions(Options):
    """One line per ranked file: the critic's agreement with the miniature's oracle."""

    POSITIONAL = ("ranked_paths",)
    ranked_paths: List[str] = flag(
        "ranked step records (``rank_best_of_n`` output), one or more.")
    seed: int = flag("seed of the random pick the critic's top pick is compared with.", 0)


def critic_check(opts: CriticCheckOptions) -> Dict[str, Dict[str, float]]:
    """The agreement of each ranked file, printed and returned by path."""
    from sweet_rl.io import read_jsonl

    if not opts.ranked_paths:
        raise ValueError("give one or more ranked step files (rank_best_of_n's output)")
    results = {}
    for path in opts.ranked_paths:
        values, judges = [], []
        for number, record in enumerate(read_jsonl(path), start=1):
            for key in ("messages", "ground_truth", "additional_outputs", "judge_result"):
                if key not in record:
                    raise ValueError(f"{path}:{number}: field {key!r} is missing "
                                     "(rank the file with scripts/rank_best_of_n.py first)")
            if len(record["judge_result"]) != len(record["additional_outputs"]):
                raise ValueError(f"{path}:{number}: field 'judge_result' has "
                                 f"{len(record['judge_result'])} scores for "
                                 f"{len(record['additional_outputs'])} candidates")
            values.append(turn_values(record))
            judges.append(record["judge_result"])
        result = agreement(values, judges, opts.seed)
        results[path] = result
        print(f"mini_critic_check: {path}: pairwise accuracy {result['pairwise_accuracy']:.3f} "
              f"on {result['pairs']} pairs; oracle value of the critic's pick "
              f"{result['top_pick']:.3f}, random {result['random_pick']:.3f}, "
              f"best {result['best_pick']:.3f} ({result['turns']} turns)")
    return results


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(critic_check, CriticCheckOptions, argv)


if __name__ == "__main__":
    main()
