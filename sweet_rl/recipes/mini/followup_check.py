"""Stage (diagnostic): does the miniature's offline data have the properties under which credit
over turns should matter? Measured before any method is trained.

    sweet-rl mini followup_check --offline seed0/offline.jsonl --k 3 \\
        --sampled seed0/sampled.jsonl --ranked seed0/ranked_sweet.jsonl

From the graded offline dialogues (``--offline``, simulate's layout with ``--k`` rollouts per
task), with the scripted human's rules (what a reply told is a sentence of the reference):

* tasks with a success: the share of tasks with at least one of their k dialogues passing
  every test; and the success rate of single dialogues;
* lucky successes: the share of successes in which some hidden detail was never told (the
  answer wrote the usual value, and it was right);
* successes with a wasted turn: the share of successes with a question that made the human
  tell nothing new;
* near misses: the share of failures whose answer declares every hidden constant but one
  with the reference's value;
* the follow-up rate: at *critical* turns (on the followup family: the zone that pays the
  surcharge has been told, its amount not yet), the share of the agent's turns that are the
  follow-up question (a question naming the zone).

From candidates sampled at every turn of the offline data (``--sampled``,
``sample_best_of_n``'s output, N per turn): at critical turns, the share of candidates that
are the follow-up and the share of turns whose N candidates contain it.

From ranked candidates (``--ranked``, ``rank_best_of_n``'s output, one or more critics): at
critical turns whose candidates hold the follow-up, the share where the critic's top pick is
the follow-up and the share where it is a best candidate by the oracle of
:mod:`sweet_rl.recipes.mini.critic_check` (which knows when the usual amount makes answering at
once right), each beside a random pick's expected share. Nothing is executed: answers are read
as text. Prints one line per input, then one metrics line with the headline numbers;
``--output_path`` also writes every measure as JSON, with its sidecar config.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from sweet_rl.flags import Options, flag

_CONSTANT = re.compile(r"^[ \t]*([A-Z][A-Z0-9_]*)[ \t]*=[ \t]*([^#\n]+?)[ \t]*(?:#.*)?$", re.M)


def answer_constants(text: str) -> Dict[str, object]:
    """The constants an answer declares (``NAME = literal``; the first of each name), values
    read as Python literals (unreadable ones kept as text)."""
    found: Dict[str, object] = {}
    for name, value in _CONSTANT.findall(text or ""):
        try:
            found.setdefault(name, ast.literal_eval(value))
        except (ValueError, SyntaxError):
            found.setdefault(name, value)
    return found


def details_right(answer: str, hidden: Dict[str, object]) -> int:
    """How many of the hidden constants the answer declares with the reference's value."""
    declared = answer_constants(answer)
    return sum(name in declared and declared[name] == value for name, value in hidden.items())


def _told(messages: Sequence[Dict]) -> str:
    return " ".join(m["content"] for m in messages if m.get("role") == "user")


def critical_keyword(reference: str, told: str) -> Optional[str]:
    """The keyword of the follow-up question ("zone 3") when the dialogue so far (``told``:
    the human's replies) sits at a critical turn of a followup task, else None."""
    from sweet_rl.simulators.scripted_simulator import hidden_details

    details = dict(hidden_details(reference))
    surcharge = details.get("surcharge")
    if surcharge is None:
        return None  # not a followup task
    keyword = next((k for k in details if k not in ("postage", "surcharge")), None)
    if keyword is None or surcharge not in told or details[keyword] in told:
        return None
    return keyword


def is_follow_up(candidate: str, keyword: str) -> bool:
    """A question (not an answer) whose message names the zone: what tells the amount."""
    from sweet_rl.recipes.mini.critic_check import ANSWER_MARK
    from sweet_rl.simulators.scripted_simulator import names

    return ANSWER_MARK not in candidate and names(candidate.split("OUTPUT:")[-1], keyword)


def offline_properties(rows: List[Dict], k: int) -> Dict[str, float]:
    """The offline data's measures (see the module docstring)."""
    from sweet_rl.recipes.mini.critic_check import oracle_value
    from sweet_rl.layout import row_matrix
    from sweet_rl.simulators.scripted_simulator import hidden_details

    successes = lucky = wasted = failures = near = critical = followed = 0
    for row in rows:
        reference = row["task"]["ground_truth"]
        hidden = row["task"]["mini_details"]
        history = row["dialogue_history"]
        sentences = [sentence for _, sentence in hidden_details(reference)]
        told = _told(history)
        if row["reward"] >= 1.0:
            successes += 1
            lucky += any(sentence not in told for sentence in sentences)
            wasted += any(oracle_value(turn["content"], reference, _told(history[:at])) == 0
                          for at, turn in enumerate(history[:-1]) if turn["role"] == "assistant")
        else:
            failures += 1
            near += details_right(row.get("answer") or "", hidden) == len(hidden) - 1
        for at, turn in enumerate(history):
            keyword = critical_keyword(reference, _told(history[:at]))
            if turn["role"] == "assistant" and keyword:
                critical += 1
                followed += is_follow_up(turn["content"], keyword)
    tasks = row_matrix(len(rows), k)
    solved = sum(any(rows[r]["reward"] >= 1.0 for r in task) for task in tasks)
    return {"dialogues": len(rows), "success": successes / max(1, len(rows)),
            "tasks": len(tasks), "tasks_with_success": solved / max(1, len(tasks)),
            "lucky_successes": lucky / max(1, successes),
            "successes_with_wasted_turn": wasted / max(1, successes),
            "near_miss_failures": near / max(1, failures),
            "critical_turns": critical, "follow_up_rate": followed / max(1, critical)}


def candidate_properties(records: List[Dict]) -> Dict[str, float]:
    """At critical turns: the share of candidates that are the follow-up, and of turns whose
    candidates contain it."""
    turns = containing = candidates = follow_ups = 0
    for record in records:
        keyword = critical_keyword(record["ground_truth"], _told(record["messages"][:-1]))
        if keyword is None:
            continue
        hits = [is_follow_up(c, keyword) for c in record["additional_outputs"]]
        turns += 1
        containing += any(hits)
        candidates += len(hits)
        follow_ups += sum(hits)
    return {"critical_turns": turns, "candidates_per_turn": candidates / max(1, turns),
            "follow_up_share": follow_ups / max(1, candidates),
            "turns_containing_follow_up": containing / max(1, turns)}


def critic_properties(records: List[Dict]) -> Dict[str, float]:
    """At critical turns whose candidates hold the follow-up: the critic's top pick against
    the follow-up and the oracle's best, beside a random pick's expected share."""
    from sweet_rl.recipes.mini.critic_check import turn_values

    turns = picked_follow_up = picked_best = chance_follow_up = chance_best = 0.0
    for record in records:
        keyword = critical_keyword(record["ground_truth"], _told(record["messages"][:-1]))
        candidates = record["additional_outputs"]
        if keyword is None:
            continue
        hits = [is_follow_up(c, keyword) for c in candidates]
        if not any(hits):
            continue
        values = turn_values(record)
        judge = record["judge_result"]
        top = max(range(len(judge)), key=judge.__getitem__)
        turns += 1
        picked_follow_up += hits[top]
        picked_best += values[top] == max(values)
        chance_follow_up += sum(hits) / len(hits)
        chance_best += sum(v == max(values) for v in values) / len(values)
    share = 1 / max(1, turns)
    return {"turns": int(turns), "top_is_follow_up": picked_follow_up * share,
            "random_is_follow_up": chance_follow_up * share,
            "top_is_oracle_best": picked_best * share, "random_is_oracle_best": chance_best * share}


@dataclass(kw_only=True)
class FollowupCheckOptions(Options):
    """Print the properties of the offline data, the candidates and the critics' choices."""

    offline: Optional[str] = flag(
        "graded offline dialogues (simulate's layout, evaluate_code run on it).", None)
    k: int = flag("rollouts per task in --offline.", 3)
    sampled: Optional[str] = flag(
        "candidates per turn of the offline data (sample_best_of_n's output).", None)
    ranked: List[str] = flag("ranked candidates (rank_best_of_n's output), one file or more.",
                             [])
    output_path: Optional[str] = flag("also write every measure here (JSON).", None)

    def check(self) -> None:
        if not (self.offline or self.sampled or self.ranked):
            raise ValueError("give --offline, --sampled or --ranked (or several)")
        if self.k < 1:
            raise ValueError(f"--k must be at least 1, got {self.k}")


def _offline_rows(path: str, k: int) -> List[Dict]:
    from sweet_rl.io import read_jsonl

    rows = list(read_jsonl(path))
    for number, row in enumerate(rows, start=1):
        for key, kind, what in (("reward", (int, float), "number"), ("task", dict, "object"),
                                ("dialogue_history", list, "list")):
            if not isinstance(row.get(key), kind):
                raise ValueError(f"{path}:{number}: field {key!r} is missing or not a {what} "
                                 "(grade the file with evaluate_code first)")
        if "mini_details" not in row["task"]:
            raise ValueError(f"{path}:{number}: field 'task.mini_details' is missing (not a "
                             "miniature task)")
    if len(rows) % k:
        raise ValueError(f"{path}: {len(rows)} rows are not a whole number of --k {k} "
                         "rollouts per task")
    return rows


def followup_check(opts: FollowupCheckOptions) -> Dict[str, Dict]:
    """Every measure asked for, printed and returned by input (``offline``, ``sampled``,
    and each ranked file's path)."""
    import json

    from sweet_rl.io import write_sidecar

    # every input is read and checked before anything is measured or written
    rows = _offline_rows(opts.offline, opts.k) if opts.offline else None
    sampled = _records(opts.sampled, False) if opts.sampled else None
    ranked = {path: _records(path, True) for path in opts.ranked}
    results: Dict[str, Dict] = {}
    headline = []
    if rows is not None:
        results["offline"] = m = offline_properties(rows, opts.k)
        print(f"mini_followup_check: offline {opts.offline}: {m['dialogues']} dialogues, "
              f"success {m['success']:.3f}; tasks with a success among their {opts.k} "
              f"{m['tasks_with_success']:.3f} (of {m['tasks']}); lucky successes "
              f"{m['lucky_successes']:.3f}; successes with a wasted turn "
              f"{m['successes_with_wasted_turn']:.3f}; near-miss failures "
              f"{m['near_miss_failures']:.3f}; follow-up at the critical turn "
              f"{m['follow_up_rate']:.3f} (of {m['critical_turns']})")
        headline += [f"success={m['success']:.3f}",
                     f"tasks_with_success={m['tasks_with_success']:.3f}",
                     f"lucky={m['lucky_successes']:.3f}",
                     f"near_miss={m['near_miss_failures']:.3f}"]
    if sampled is not None:
        results["sampled"] = m = candidate_properties(sampled)
        print(f"mini_followup_check: candidates {opts.sampled}: {m['critical_turns']} "
              f"critical turns, {m['candidates_per_turn']:.1f} candidates each; follow-up "
              f"{m['follow_up_share']:.3f} of candidates, in "
              f"{m['turns_containing_follow_up']:.3f} of the turns")
        headline += [f"follow_up_share={m['follow_up_share']:.3f}",
                     f"turns_with_follow_up={m['turns_containing_follow_up']:.3f}"]
    for path, records in ranked.items():
        results[path] = m = critic_properties(records)
        print(f"mini_followup_check: critic {path}: {m['turns']} critical turns with the "
              f"follow-up among the candidates; top pick is the follow-up "
              f"{m['top_is_follow_up']:.3f} (random {m['random_is_follow_up']:.3f}), an "
              f"oracle-best candidate {m['top_is_oracle_best']:.3f} (random "
              f"{m['random_is_oracle_best']:.3f})")
        headline.append(f"critic_picks_follow_up={m['top_is_follow_up']:.3f}")
    print("mini_followup_check: metrics " + " ".join(headline))
    if opts.output_path:
        with open(opts.output_path, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)
        write_sidecar(opts.output_path, opts.flags(), "mini_followup_check")
    return results


def _records(path: str, ranked: bool) -> List[Dict]:
    from sweet_rl.io import read_jsonl

    keys = ("messages", "ground_truth", "additional_outputs") + (("judge_result",) if ranked
                                                                 else ())
    records = list(read_jsonl(path))
    for number, record in enumerate(records, start=1):
        for key in keys:
            if key not in record:
                raise ValueError(f"{path}:{number}: field {key!r} is missing ("
                                 f"{'rank_best_of_n' if ranked else 'sample_best_of_n'}'s "
                                 "output is needed)")
    return records


def main(argv=None) -> None:
    from sweet_rl.flags.command import run_stage

    run_stage(followup_check, FollowupCheckOptions, argv)


if __name__ == "__main__":
    main()
