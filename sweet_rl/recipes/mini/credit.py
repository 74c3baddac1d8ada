"""Recipe: where does credit over turns decide? (``sweet-rl mini credit``;
docs/mini_reproduction.md, "Credit assignment: two families side by side").

Two reproductions at once, on one pool of ``jobs`` slots, every stage of either starting as
soon as a slot is free:

* ``OUT/control``: the quick miniature (:data:`settings.QUICK`, the basic late_fee family),
  where the successful dialogues show the whole skill and cloning them should win, with the
  same data-scaling sweep;
* ``OUT/followup``: the followup family (:mod:`sweet_rl.recipes.mini.followup_tasks`) with
  :data:`FOLLOWUP`'s settings, the data-scaling sweep and its property check.

Both compare the methods at matched gradient steps. Then both tables print, and
``OUT/tables.md`` holds them with the wall time. Every knob of ``sweet-rl mini run`` (flag or
variable) reaches both sides, except the folders (``OUT`` is the parent of both) and the
offline data: a scripted offline file belongs to one family, so ``CONTROL_OFFLINE_FROM`` and
``FOLLOWUP_OFFLINE_FROM`` give one to each side.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Dict, Mapping, Optional, Sequence, Tuple

from sweet_rl.recipes.mini.settings import QUICK, RunSettings, from_environment

# The followup side's settings: a warm agent cloned from a mix in which thorough askers are
# rare (the family's default mix), a curriculum of recall drills, the quick miniature's
# learning rates, 16 candidates per turn, the sweep over thirds of the offline set, and
# TEST_TASKS x EVAL_ROLLOUTS (about 500) held-out dialogues per method and seed.
FOLLOWUP = {"family": "followup", "agent_prompt": "mini", "train_tasks": "400",
            "valid_tasks": "100", "test_tasks": "167", "eval_rollouts": "3", "drills": "2000",
            "drill_epochs": "6", "epochs": "3", "offline_tasks": "240", "k": "3",
            "num_samples": "16", "agent_lr": "3e-5", "fractions": "1/3,2/3",
            "methods": "rft,multiturn_dpo,sweet,sweet_no_gt", "bon_critics": ""}
SIDES = ("control", "followup")
PRIORITY = {"followup": 0, "control": 1}
DEFAULT_OUT = "outputs/mini_credit"


def side_settings(args: Sequence[str], environ: Mapping[str, str]
                  ) -> Tuple[str, Dict[str, RunSettings]]:
    """(the parent folder, each side's settings): the command line over the environment over
    the side's preset; the folders and the family are the side's own."""
    presets = {"control": dict(QUICK, family="basic", fractions=FOLLOWUP["fractions"]),
               "followup": dict(FOLLOWUP)}
    sides, out = {}, DEFAULT_OUT
    for side in SIDES:
        # one warm-start training at a time: both sides build theirs at once, so a second
        # try trained beside the first would take a busy slot, not an idle one
        preset = dict(presets[side], match_steps="True", tries_at_once="1", out=DEFAULT_OUT)
        offline = environ.get(f"{side.upper()}_OFFLINE_FROM")
        if offline:
            preset["offline_from"] = offline
        settings = from_environment(RunSettings, args, environ, preset)
        out = settings.out
        if settings.family != presets[side]["family"]:
            raise ValueError(f"--family (FAMILY) is fixed per side; the {side} side runs "
                             f"{presets[side]['family']}")
        if settings.warm or settings.logs:
            raise ValueError("--warm (WARM) and --logs (LOGS) would be shared by both sides; "
                             "each side keeps its own under OUT/<side>")
        sides[side] = dataclasses.replace(settings, out=os.path.join(out, side))
    return out, sides


def credit(out: str, sides: Dict[str, RunSettings]) -> str:
    """Both reproductions side by side on one pool of slots, then both tables."""
    from sweet_rl.recipes.mini.reproduction import configs_folder, reproduce
    from sweet_rl.recipes.mini.schedule import Scheduler, time_ledger

    started = time.time()
    configs_folder()  # a checkout without configs/ stops here, before any work
    first = sides[SIDES[0]]
    pool = None
    runs = {}
    for side, s in sides.items():
        runs[side] = Scheduler.for_settings(s, os.path.join(s.out, "logs"), pool)
        pool = runs[side].slots
    top = Scheduler.for_settings(first, os.path.join(out, "logs"), pool)
    # at equal seeds the followup side's stages first: its chains are the longer
    top.finish(*(top.start(side, reproduce, s, runs[side], priority=PRIORITY[side])
                 for side, s in sides.items()))
    titles = {"control": "Control: the quick miniature (basic late_fee family)",
              "followup": "The followup family"}
    parts = []
    for side, s in sides.items():
        with open(os.path.join(s.out, "table.md"), encoding="utf-8") as handle:
            parts.append(f"## {titles[side]}\n\n{handle.read().rstrip()}")
    wall = time.time() - started
    seconds = int(wall)
    ledger = time_ledger(pool.spent, wall, first.slots())
    text = ("\n\n".join(parts) + f"\n\nboth: {seconds // 60} min {seconds % 60} s\n\n"
            f"## Where the time went\n\n{ledger}\n")
    with open(os.path.join(out, "tables.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    print(text, end="")
    return text


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.help import render_help
    from sweet_rl.flags.parse import HelpRequested
    from sweet_rl.recipes.mini.reproduction import check_device
    from sweet_rl.recipes.mini.schedule import StepFailed

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        out, sides = side_settings(args, os.environ)
        check_device(sides["control"].device, sides["control"].python)
    except HelpRequested:
        from sweet_rl.flags.command import _print

        _print(render_help(RunSettings, "sweet-rl mini credit") + "\n\nEvery flag is also "
               "an environment variable of its name in capitals; the control side starts "
               "from QUICK, the followup side from FOLLOWUP (sweet_rl/recipes/mini/credit.py)"
               f", both with match_steps; OUT (default: {DEFAULT_OUT}) holds control/ and "
               "followup/; CONTROL_OFFLINE_FROM and FOLLOWUP_OFFLINE_FROM give each side its "
               "offline data.")
        return
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    try:
        credit(out, sides)
    except (StepFailed, OSError) as err:
        print(f"sweet-rl mini credit: {err}", file=sys.stderr)
        sys.exit(1)
