"""The one rule by which every sampling seed is derived from a run's ``--seed``.

Seeds form a tree: the run's seed, then a seed per row (a dialogue, or a step record of the
sample stage), then a seed per turn or per candidate. Each level uses the same step,

    child = (parent * 1_000_003 + index) mod 2**31

so that a row's seed depends only on the run's seed and the row's position -- never on which
rows share a batch or chunk, nor on where a killed run was resumed. The multiplier is an odd
prime, so for a fixed index distinct parents give distinct children; distinct indices under
one parent stay distinct while they are below the multiplier. Results lie in [0, 2**31), which
torch, numpy, vLLM and the OpenAI API all accept.

The sample stage's record seeds are the values its existing output files were written with,
so resuming any of them draws the same seeds.
"""

from __future__ import annotations

from typing import List

MULTIPLIER = 1_000_003
MODULUS = 2 ** 31


def derive_seed(parent: int, *indices: int) -> int:
    """The seed ``indices`` levels below ``parent``: one :data:`MULTIPLIER` step per index."""
    seed = int(parent) % MODULUS
    for index in indices:
        seed = (seed * MULTIPLIER + int(index)) % MODULUS
    return seed


def row_seed(seed: int, row: int) -> int:
    """Row ``row``'s seed under a run seeded ``seed`` (a dialogue of ``simulate``, a step
    record of ``sample_best_of_n``)."""
    return derive_seed(seed, row)


def turn_seed(row: int, turn: int) -> int:
    """The seed of turn ``turn`` of the dialogue whose row seed is ``row``."""
    return derive_seed(row, turn)


def candidate_seeds(record: int, n: int) -> List[int]:
    """One seed per candidate of a step record whose seed is ``record``."""
    return [derive_seed(record, j) for j in range(int(n))]
