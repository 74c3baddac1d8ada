"""A miniature ColBench: a seeded generator of small backend tasks with hidden details.

Each task asks for one short function and leaves 2-3 details out of the request. The agent can
only learn them by asking; the reference function (the task's ``ground_truth``, which is also
the simulated human's hidden information) carries them as named constants at the top of its
body, each under a comment that says it in words::

    def discounted_total(price, quantity):
        # The discount takes off 15 percent.
        RATE = 15
        # The discount kicks in from 4 items.
        MINIMUM = 4
        ...

The constant's name, in lower case, is the detail's keyword: a question that names it ("What
is the rate?") gets the comment back as the answer from the scripted simulator
(:mod:`sweet_rl.simulators.scripted_simulator`); a question that names none wastes a turn.
The comment comes first on purpose: an agent that asked writes the human's sentence back word
for word and then the value it just wrote, which a tiny model learns as a plain copy (a value
after ``RATE =`` with its sentence 200 tokens back was not learnt in 780 updates).

The families (small, regular vocabulary; the keywords are shared across families):

=================  =====================  ==========================================
family             signature              hidden details (keywords)
=================  =====================  ==========================================
discount           discounted_total       rate, minimum, rounding
late_fee           late_fee               fee, grace, cap
shipping           shipping_cost          base, rate, rounding
grade              score_label            threshold, case
=================  =====================  ==========================================

Within a family the details' option sets are disjoint, and no option is a number of the
function's body or of the agent's instructions: which value is meant can be read from the
value alone, so an agent that asked finds it in the dialogue by what it is, not only by where
it stands (a tiny model learns the first far sooner).

Why asking pays, and how guessing or wasting turns is worse off:

* every detail has a default a guesser would reach for (``Detail.guess``), and a hidden value
  is never that default, so a guess is always wrong;
* the ten test cases are chosen so that getting any one detail wrong (any other option, or the
  guess) changes the output of at least ``MIN_FAILS`` = 3 tests: the reward (fraction of tests
  passed) drops by 0.3 or more per detail not asked about, and only an answer with every
  detail right passes all ten;
* the natural good dialogue is short: one question per detail (2-3 turns), then the answer;
  the simulator answers at most two details per question, so lumping all of them into one
  question does not skip the work for a three-detail task;
* a question that names no keyword reveals nothing: it costs a turn of the 10 the environment
  allows and changes no outcome. Its cost is not a penalty in the reward but in what it fails
  to buy, which is the credit-assignment problem SWEET-RL's per-turn critic is meant to solve:
  the final reward of a dialogue with wasted turns is explained only by the turns that asked.

Splits: all combinations of hidden values of all families are split once, by a fixed seed
(``SPLIT_SEED``, not the caller's), into a train pool and a held-out test pool (about one in
five), so the train and test tasks never share a family with the same hidden values, whatever
seed draws them. ``generate_tasks(n, seed, split)`` draws from one pool and is deterministic.

Tasks are ordinary ColBench backend rows (``problem_description``, ``ground_truth``,
``test_cases``) plus two pass-through keys no model sees, ``mini_family`` and ``mini_details``
(the hidden values), which the scripted dialogues (:mod:`sweet_rl.recipes.mini.dialogues`) and
the tests read. Write them with :func:`sweet_rl.io.write_jsonl` and pass the file to
``simulate_interactions.py --input_path FILE --env_model scripted``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from sweet_rl.records import Task

MIN_FAILS = 3  # tests a one-detail-wrong answer must fail
NUM_TESTS = 10
CANDIDATES = 200  # inputs drawn per task, from which the ten tests are picked
POOL_ATTEMPTS = 5  # fresh candidate draws before a task is declared impossible
SPLIT_SEED = 20250311  # fixed: the split must not move with the caller's seed
TEST_SHARE = 5  # one combination in TEST_SHARE goes to the held-out split
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Detail:
    name: str  # the constant's name; its lower case is the keyword a question must name
    sentence: str  # how the human says it, ``{}`` standing for the value (repr for strings)
    options: Tuple[object, ...]  # the values it may take (the guess is never among them)
    guess: object  # what an agent that does not ask would write

    @property
    def keyword(self) -> str:
        return self.name.lower()

    def says(self, value: object) -> str:
        """The human's sentence for this value: capitalised, with a full stop."""
        said = self.sentence.format(repr(value) if isinstance(value, str) else value)
        return said[0].upper() + said[1:] + "."


@dataclass(frozen=True)
class Family:
    name: str
    signature: str  # ``def f(a, b)``
    request: str  # the problem description before the signature sentence
    details: Tuple[Detail, ...]
    body: str  # the function body after the constants, indented four spaces
    draw_input: Callable[[random.Random], tuple]

    def code(self, values: Dict[str, object]) -> str:
        """The function with these detail values as its named constants."""
        lines = [f"{self.signature}:"]
        for detail in self.details:
            value = values[detail.name]
            lines += [f"    # {detail.says(value)}", f"    {detail.name} = {value!r}"]
        return "\n".join(lines) + "\n" + self.body

    def guesses(self) -> Dict[str, object]:
        return {detail.name: detail.guess for detail in self.details}


# Rounding to whole units in integer arithmetic (the grader compares floats exactly, and no
# import is needed: the benchmark grader runs the code with separate locals).
_ROUND = ("    if ROUNDING == 'up':\n        return -(-{x} // {unit})\n"
          "    if ROUNDING == 'down':\n        return {x} // {unit}\n"
          "    return ({x} + {half}) // {unit}\n")
_ROUNDING_SENTENCE = "the rounding goes {}"

FAMILIES: Tuple[Family, ...] = (
    Family(
        "discount", "def discounted_total(price, quantity)",
        "Write a function that gives the total price of an order, in whole units, after a bulk "
        "discount. I have a discount rate, a minimum quantity and a rounding mode in mind.",
        (Detail("RATE", "the discount takes off {} percent", (15, 20, 25, 30, 35, 40, 45), 10),
         Detail("MINIMUM", "the discount kicks in from {} items",
                (2, 3, 4, 6, 8), 1),
         Detail("ROUNDING", _ROUNDING_SENTENCE, ("up", "down"), "nearest")),
        "    hundredths = price * quantity * 100\n"
        "    if quantity >= MINIMUM:\n"
        "        hundredths = price * quantity * (100 - RATE)\n"
        + _ROUND.format(x="hundredths", unit=100, half=50),
        lambda rng: (rng.randint(1, 60), rng.randint(1, 14))),
    Family(
        "late_fee", "def late_fee(days_late)",
        "Write a function that works out the fee for returning a library book late. I have a "
        "fee per day, a grace period and a cap in mind.",
        (Detail("FEE", "the fee runs {} per day", (2, 3, 4, 5), 1),
         Detail("GRACE", "the grace period lasts {} days", (6, 7, 8, 9, 11, 12, 14), 0),
         Detail("CAP", "the fee never goes above {}", (20, 25, 30, 40, 50, 60), 100)),
        "    fee = max(0, days_late - GRACE) * FEE\n"
        "    return min(fee, CAP)\n",
        lambda rng: (rng.randint(0, 60),)),
    Family(
        "shipping", "def shipping_cost(grams)",
        "Write a function that gives the cost of shipping a parcel from its weight in grams. "
        "I have a base charge, a rate per kilogram and a rounding mode in mind.",
        (Detail("BASE", "the base charge totals {}", (6, 7, 8, 9, 11, 12), 0),
         Detail("RATE", "each kilogram adds {}", (2, 3, 4, 5), 1),
         Detail("ROUNDING", _ROUNDING_SENTENCE, ("up", "down"), "nearest")),
        "    if ROUNDING == 'up':\n        kilograms = -(-grams // 1000)\n"
        "    elif ROUNDING == 'down':\n        kilograms = grams // 1000\n"
        "    else:\n        kilograms = (grams + 500) // 1000\n"
        "    return BASE + RATE * kilograms\n",
        lambda rng: (rng.randint(100, 20000),)),
    Family(
        "grade", "def score_label(score)",
        "Write a function that labels an exam score from 0 to 100 as pass or fail. I have a "
        "threshold and a letter case in mind.",
        (Detail("THRESHOLD", "a pass needs {} or more",
                (40, 45, 55, 60, 65, 70, 75, 80, 85), 50),
         Detail("CASE", "the letters should be {}", ("upper", "title"), "lower")),
        "    label = 'pass' if score >= THRESHOLD else 'fail'\n"
        "    if CASE == 'upper':\n        return label.upper()\n"
        "    if CASE == 'title':\n        return label.title()\n"
        "    return label\n",
        lambda rng: (rng.randint(0, 100),)),
)
FAMILY_BY_NAME = {family.name: family for family in FAMILIES}
KEYWORDS = sorted({d.keyword for family in FAMILIES for d in family.details})


def _function(code: str) -> Callable:
    namespace: Dict[str, object] = {}
    exec(code, namespace)  # our own generated code, never a model's
    return next(v for k, v in namespace.items() if k != "__builtins__")


def one_wrong_variants(family: Family, values: Dict[str, object]) -> List[Dict[str, object]]:
    """Every assignment that differs from ``values`` in exactly one detail (another option or
    the guess): what the tests must tell apart from the reference."""
    variants = []
    for detail in family.details:
        for other in dict.fromkeys(detail.options + (detail.guess,)):
            if other != values[detail.name]:
                variants.append({**values, detail.name: other})
    return variants


def _pick_tests(family: Family, values: Dict[str, object], rng: random.Random) -> List[tuple]:
    """Ten distinct inputs such that each one-wrong variant differs on >= MIN_FAILS of them:
    greedy over a seeded candidate pool, the input closing most of the remaining gap first.
    A pool that cannot (rare: some draws hold too few telling inputs) is replaced by a fresh
    draw; the first pool's tasks are unchanged by the retries."""
    reference = _function(family.code(values))
    variants = [_function(family.code(v)) for v in one_wrong_variants(family, values)]
    for _attempt in range(POOL_ATTEMPTS):
        pool = list(dict.fromkeys(family.draw_input(rng) for _ in range(CANDIDATES)))
        differs = {args: [f(*args) != reference(*args) for f in variants] for args in pool}
        counts, chosen = [0] * len(variants), []
        while len(chosen) < NUM_TESTS:
            def gain(args):
                return sum(hit and count < MIN_FAILS for hit, count in zip(differs[args], counts))

            best = max((a for a in pool if a not in chosen), key=gain)  # first best: deterministic
            chosen.append(best)
            counts = [count + hit for count, hit in zip(counts, differs[best])]
        if min(counts) >= MIN_FAILS:
            return chosen
    raise RuntimeError(f"{family.name} {values}: no ten tests tell every detail apart")


def _combinations(family: Family) -> List[Dict[str, object]]:
    names = [d.name for d in family.details]
    return [dict(zip(names, combo)) for combo in itertools.product(*(d.options
                                                                     for d in family.details))]


def select_families(names: Optional[Sequence[str]] = None) -> Tuple[Family, ...]:
    """The families named (all of them for ``None``), in FAMILIES' order."""
    if names is None:
        return FAMILIES
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in FAMILY_BY_NAME]
    if unknown or not names:
        raise ValueError(f"unknown families {unknown or names!r}; choose from "
                         f"{[f.name for f in FAMILIES]}")
    return tuple(f for f in FAMILIES if f.name in names)


def split_pool(split: str, families: Optional[Sequence[str]] = None
               ) -> List[Tuple[Family, Dict[str, object]]]:
    """(family, hidden values) of one split, in a fixed order. A family's split does not
    depend on which other families are asked for."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {SPLITS}")
    pool = []
    for family in select_families(families):
        combos = _combinations(family)
        random.Random(f"{SPLIT_SEED}:{family.name}").shuffle(combos)
        held_out = len(combos) // TEST_SHARE
        pool += [(family, c) for c in (combos[:held_out] if split == "test"
                                       else combos[held_out:])]
    return pool


def make_task(family: Family, values: Dict[str, object], rng: random.Random) -> Task:
    name = family.signature[4:].split("(")[0]
    tests = _pick_tests(family, values, rng)
    rng.shuffle(tests)  # the greedy order would put the telling inputs first
    test_cases = {f"test{i + 1}": f"{name}{args!r}" if len(args) > 1 else f"{name}({args[0]!r})"
                  for i, args in enumerate(tests)}
    description = f"{family.request} The signature of the function is: {family.signature}"
    return Task(problem_description=description, ground_truth=family.code(values),
                test_cases=test_cases,
                extra={"mini_family": family.name, "mini_details": dict(values)})


def generate_tasks(n: int, seed: int = 0, split: str = "train",
                   families: Optional[Sequence[str]] = None) -> List[Task]:
    """``n`` tasks of ``split`` (of the named ``families``; all by default), the same for the
    same arguments. Hidden values are drawn without repetition while the pool lasts (train: a
    few hundred), then the pool is drawn again (new test inputs, same hidden values)."""
    rng = random.Random(f"mini:{seed}:{split}")
    pool = split_pool(split, families)
    order: List[Tuple[Family, Dict[str, object]]] = []
    while len(order) < n:
        order += rng.sample(pool, len(pool))
    return [make_task(family, values, rng) for family, values in order[:n]]


def task_key(task: Task) -> Tuple[str, Tuple[Tuple[str, object], ...]]:
    """What identifies a task across splits: its family and hidden values."""
    return task.extra["mini_family"], tuple(sorted(task.extra["mini_details"].items()))


def guess_values(task: Task, known: Sequence[str] = ()) -> Dict[str, object]:
    """The detail values an agent that asked about ``known`` (names) would write: those right,
    the others guessed."""
    family = FAMILY_BY_NAME[task.extra["mini_family"]]
    return {d.name: task.extra["mini_details"][d.name] if d.name in known else d.guess
            for d in family.details}


def corpus(families: Optional[Sequence[str]] = None) -> Iterator[str]:
    """Every text the miniature's dialogues (of ``families``; all by default) are made of
    (requests, references of every hidden value, questions, replies), for the tokenizer of its
    tiny model to learn: :func:`sweet_rl.models.tiny_model.build_tokenizer` ``extra_text``."""
    from sweet_rl.recipes.mini.dialogues import IRRELEVANT_QUESTIONS, question
    from sweet_rl.simulators.scripted_simulator import UNHELPFUL_REPLY

    for family in select_families(families):
        yield f"{family.request} The signature of the function is: {family.signature}"
        for values in _combinations(family):
            yield family.code(values)
        yield family.code(family.guesses())
        yield from (question(detail.keyword) for detail in family.details)
    yield from IRRELEVANT_QUESTIONS
    yield UNHELPFUL_REPLY
