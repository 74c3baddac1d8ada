"""The miniature's second task family, ``followup``: a detail that only a follow-up question
reveals, and defaults that are sometimes right.

The basic families (:mod:`sweet_rl.recipes.mini.tasks`) reward one skill: ask about every detail
the request names, then copy the told values. Cloning the successful dialogues teaches that
skill directly, so rejection fine-tuning beats every preference method there. This family is
built so that credit over turns decides instead:

* three hidden details, all needed: the postage, which zone pays a surcharge, and how much
  that surcharge adds;
* the third is *conditional*: its constant is named after the zone (``ZONE_3 = 15``), so the
  scripted human tells it only to a question that names the zone, which the agent learns only
  from the answer about the surcharge ("The surcharge goes to zone 3."). A question about "the
  surcharge" or "the amount" does not reveal it;
* the request states a usual value for every detail (postage 5, zone 1, 20 more), and
  each hidden value equals it with probability ``DEFAULT_SHARE`` (0.3): an agent that skips the
  follow-up question and writes the usual amount succeeds about three times in ten, so some
  successful dialogues carry that bad habit;
* questions that name no detail reveal nothing, and the dialogue allows ``MAX_TURNS`` (4) agent
  turns: one per detail and the answer, so a wasted question costs a detail;
* the answer is a copy, as in the basic families (constants under their sentences, a fixed
  body but for the zone's constant name): no arithmetic to learn. Every value is a number: the
  tiny warm agent learnt to copy told numbers long before told strings (with kinds of parcel
  as quoted words, 5 of 18 drills wrote the told kind after 1875 updates, 25 of 27 the told
  postage).

The reference, which is also the scripted human's hidden information::

    def parcel_cost(kilograms, zone):
        # The postage starts at 7.
        POSTAGE = 7
        # The surcharge goes to zone 3.
        SURCHARGE = 3
        # Zone 3 adds 15.
        ZONE_3 = 15
        cost = POSTAGE + kilograms
        if zone == SURCHARGE:
            cost = cost + ZONE_3
        return cost

Splits: the combinations of hidden values are split once by a fixed seed into train,
validation and test, separately within each pattern of which details are at their usual value,
so every split keeps the same chance of a lucky guess. The one combination with every detail
at its usual value is in every split (it has no other way to be drawn). Tasks are drawn with
that chance: each detail is usual with probability ``DEFAULT_SHARE``, the rest uniform.
``mini_family`` is ``followup`` and ``mini_details`` holds the reference's constants by name.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Dict, Iterator, List, Tuple

from sweet_rl.recipes.mini.tasks import Detail, _pick_tests
from sweet_rl.records import Task

FAMILY_NAME = "followup"
SIGNATURE = "def parcel_cost(kilograms, zone)"
ZONES = (1, 2, 3, 4)
DEFAULT_SHARE = 0.3  # chance that a hidden value is the usual one the request states
MAX_TURNS = 4  # agent turns per dialogue: one question per detail, then the answer
SPLITS = ("train", "valid", "test")
SPLIT_SEED = 20250312  # fixed: the split must not move with the caller's seed
SHARES = {"test": 5, "valid": 10}  # one combination in 5 to test, one in 10 to validation
# The usual values in other words than the human's sentences, so that the only place to copy
# a told value from is the human's reply.
REQUEST = ("Write a function that gives the cost of sending a parcel from its weight in "
           "kilograms and its zone. I have a postage, a surcharge and its amount in mind; "
           "usually the postage is 5, zone 1 pays the surcharge, and it costs 20 more.")
BODY = ("    cost = POSTAGE + kilograms\n"
        "    if zone == SURCHARGE:\n"
        "        cost = cost + {name}\n"
        "    return cost\n")
# The details in the order of the reference; the usual value is the guess and the first option.
# Within the family the option sets are disjoint (a value says which detail it is). AMOUNT is a
# placeholder: its constant is named after the zone (``amount_detail``).
DETAILS = (Detail("POSTAGE", "the postage starts at {}", (5, 6, 7, 8, 9, 10, 11, 12), 5),
           Detail("SURCHARGE", "the surcharge goes to zone {}", ZONES, 1),
           Detail("AMOUNT", "zone {zone} adds {}", (20, 13, 14, 15, 16, 17, 18, 19), 20))


def amount_detail(zone: int) -> Detail:
    """The surcharge's amount as the reference declares it for ``zone``: the constant is
    named after the zone (``ZONE_3``, keyword "zone 3"), so only a question naming the zone
    gets it told."""
    amount = DETAILS[2]
    return Detail(f"ZONE_{zone}", amount.sentence.replace("{zone}", str(zone)), amount.options,
                  amount.guess)


@dataclass(frozen=True)
class ParcelFamily:
    """The family in the shape :func:`sweet_rl.recipes.mini.tasks._pick_tests` reads."""

    name: str = FAMILY_NAME
    signature: str = SIGNATURE
    details: Tuple[Detail, ...] = DETAILS

    @staticmethod
    def code(values: Dict[str, object]) -> str:
        """The reference for ``{"POSTAGE", "SURCHARGE", "AMOUNT"}`` values."""
        zone = values["SURCHARGE"]
        declared = [(DETAILS[0], values["POSTAGE"]), (DETAILS[1], zone),
                    (amount_detail(zone), values["AMOUNT"])]
        lines = [f"{SIGNATURE}:"]
        for detail, value in declared:
            lines += [f"    # {detail.says(value)}", f"    {detail.name} = {value!r}"]
        return "\n".join(lines) + "\n" + BODY.format(name=amount_detail(zone).name)

    @staticmethod
    def draw_input(rng: random.Random) -> tuple:
        return rng.randint(1, 30), rng.choice((0,) + ZONES)


FAMILY = ParcelFamily()


def constants(values: Dict[str, object]) -> Dict[str, object]:
    """The reference's constants by name: ``{"POSTAGE": 7, "SURCHARGE": 3, "ZONE_3": 15}``."""
    return {"POSTAGE": values["POSTAGE"], "SURCHARGE": values["SURCHARGE"],
            amount_detail(values["SURCHARGE"]).name: values["AMOUNT"]}


def usual_values() -> Dict[str, object]:
    return {detail.name: detail.guess for detail in DETAILS}


def _pattern(values: Dict[str, object]) -> Tuple[bool, ...]:
    return tuple(values[d.name] == d.guess for d in DETAILS)


def split_pool(split: str) -> List[Dict[str, object]]:
    """The combinations of one split, in a fixed order (see the module docstring)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {SPLITS}")
    names = [d.name for d in DETAILS]
    combos = [dict(zip(names, c)) for c in itertools.product(*(d.options for d in DETAILS))]
    pool = []
    for pattern in sorted({_pattern(c) for c in combos}, reverse=True):
        group = [c for c in combos if _pattern(c) == pattern]
        if len(group) == 1:  # every detail usual: in every split
            pool += group
            continue
        random.Random(f"{SPLIT_SEED}:{pattern}").shuffle(group)
        test = max(1, len(group) // SHARES["test"])
        valid = max(1, len(group) // SHARES["valid"])
        pool += {"test": group[:test], "valid": group[test:test + valid],
                 "train": group[test + valid:]}[split]
    return pool


def _draw(rng: random.Random, by_pattern: Dict[Tuple[bool, ...], List[Dict[str, object]]]
          ) -> Dict[str, object]:
    """One combination: each detail usual with probability DEFAULT_SHARE, then uniform among
    the split's combinations of that pattern (a pattern the split lacks is drawn again)."""
    while True:
        pattern = tuple(rng.random() < DEFAULT_SHARE for _ in DETAILS)
        if by_pattern.get(pattern):
            return rng.choice(by_pattern[pattern])


def make_task(values: Dict[str, object], rng: random.Random) -> Task:
    tests = _pick_tests(FAMILY, values, rng)
    rng.shuffle(tests)  # the greedy order would put the telling inputs first
    test_cases = {f"test{i + 1}": f"parcel_cost{args!r}" for i, args in enumerate(tests)}
    return Task(problem_description=f"{REQUEST} The signature of the function is: {SIGNATURE}",
                ground_truth=FAMILY.code(values), test_cases=test_cases,
                extra={"mini_family": FAMILY_NAME, "mini_details": constants(values)})


def generate_tasks(n: int, seed: int = 0, split: str = "train") -> List[Task]:
    """``n`` tasks of ``split``, the same for the same arguments (prefix-stable)."""
    by_pattern: Dict[Tuple[bool, ...], List[Dict[str, object]]] = {}
    for values in split_pool(split):
        by_pattern.setdefault(_pattern(values), []).append(values)
    rng = random.Random(f"mini-parcel:{seed}:{split}")
    tasks = []
    for _ in range(int(n)):
        tasks.append(make_task(_draw(rng, by_pattern), rng))
    return tasks


def is_followup(task: Task) -> bool:
    return task.extra.get("mini_family") == FAMILY_NAME


def zone_of(task: Task) -> int:
    return task.extra["mini_details"]["SURCHARGE"]


def answer_code(task: Task, told: Tuple[str, ...]) -> str:
    """The function an agent writes that was told the details named in ``told`` (of POSTAGE,
    SURCHARGE, AMOUNT) and writes the usual value for the others. The amount told is the told
    zone's (the right one)."""
    truth = task.extra["mini_details"]
    zone = zone_of(task)
    values = usual_values()
    values.update({name: truth[name] for name in ("POSTAGE", "SURCHARGE") if name in told})
    if "AMOUNT" in told:
        values["AMOUNT"] = truth[amount_detail(zone).name]
    return FAMILY.code(values)


def corpus() -> Iterator[str]:
    """The family's texts for the tokenizer of its tiny model (beside the basic families'
    :func:`sweet_rl.recipes.mini.tasks.corpus`): the request, the reference of every combination,
    and the questions of :mod:`sweet_rl.recipes.mini.followup_dialogues`."""
    from sweet_rl.recipes.mini.followup_dialogues import follow_up, question

    yield f"{REQUEST} The signature of the function is: {SIGNATURE}"
    for values in split_pool("train") + split_pool("valid") + split_pool("test"):
        yield FAMILY.code(values)
    yield question("postage")
    yield question("surcharge")
    yield from (follow_up(zone) for zone in ZONES)

