"""``sweet-rl mini <command> [flags]``: the miniature's commands, each imported only when run.

``python -m sweet_rl.recipes.mini <command>`` is the same entry point.
"""

from __future__ import annotations

import importlib
import sys
from typing import Dict, Optional, Sequence, Tuple

# command -> (module under sweet_rl.recipes.mini, what it does); the module's ``main`` runs it
COMMANDS: Dict[str, Tuple[str, str]] = {
    "run": ("reproduction", "the reproduction: every method over seeds, the table, Best-of-N"),
    "quick": ("quick", "the same on the quick miniature (one family, short prompt): minutes"),
    "credit": ("credit", "both family sets side by side: the control and the followup family"),
    "build_agent": ("build_agent", "the warm-started agent the methods all start from"),
    "warm_start": ("warm_start", "the warm start's base model, tasks, dialogues and drills"),
    "copy_check": ("copy_check", "whether an agent writes back the details it was told"),
    "critic_check": ("critic_check", "a critic's ranking against the miniature's oracle"),
    "followup_check": ("followup_check", "the offline data's properties credit over turns "
                       "needs"),
    "subset": ("subset", "the first part of an offline set (the data-scaling sweep)"),
    "best_of_n": ("best_of_n", "a critic's Best-of-N curve on held-out tasks (Figure 3a)"),
    "table": ("table", "the table of a run's evaluations (Table 2's shape)"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = "\n".join(f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items())
    return ("usage: sweet-rl mini <command> [flags]   (sweet-rl mini <command> --help: its "
            f"flags)\nthe miniature ColBench's commands:\n{lines}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return
    name = args[0].replace("-", "_")
    if name not in COMMANDS:
        print(f"error: no miniature command named {args[0]!r}\n{usage()}", file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(f"sweet_rl.recipes.mini.{COMMANDS[name][0]}")
    sys.argv = [f"sweet-rl mini {name}"] + args[1:]  # help names the command after argv[0]
    module.main(args[1:])
