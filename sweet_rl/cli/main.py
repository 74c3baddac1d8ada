"""``sweet-rl <stage> [flags]``: every stage as one console command.

The same stages as ``python scripts/<script>.py`` (those stay, for the original code's command
lines); each stage's module is imported only when it runs, so ``sweet-rl --help`` is instant.
Stage names are the script names; the short names below are accepted too. ``sweet-rl mini
<command>`` runs the miniature ColBench's commands (:mod:`sweet_rl.recipes.mini.commands`).
"""

from __future__ import annotations

import importlib
import sys
from typing import Dict, Optional, Sequence

# stage name (the script's name in scripts/) -> module under sweet_rl.cli
STAGES: Dict[str, str] = {
    "download_data": "download_data",
    "prepare_frontend_tasks": "prepare_frontend_tasks",
    "filter_websites": "filter_websites",
    "simulate_interactions": "simulate",
    "evaluate_code": "evaluate_code",
    "evaluate_html": "evaluate_html",
    "sample_best_of_n": "sample_best_of_n",
    "rank_best_of_n": "rank_best_of_n",
    "generate_random_pairs_from_ranks": "generate_random_pairs",
    "train_sft": "train_sft",
    "train_dpo": "train_dpo",
    "merge_shards": "merge",
}
SHORT_NAMES = {"simulate": "simulate_interactions", "generate_random_pairs":
               "generate_random_pairs_from_ranks", "pairs": "generate_random_pairs_from_ranks",
               "merge": "merge_shards"}


def usage() -> str:
    from sweet_rl.recipes.mini.commands import COMMANDS as MINI

    names = "\n".join(f"  {name}" for name in STAGES)
    mini = "\n".join(f"  mini {name}" for name in MINI)
    return ("usage: sweet-rl <stage> [flags]   (sweet-rl <stage> --help: the stage's flags)\n"
            f"stages:\n{names}\n"
            f"short names: {', '.join(f'{a} = {b}' for a, b in SHORT_NAMES.items())}\n"
            "the miniature ColBench (sweet-rl mini --help: what each does):\n"
            f"{mini}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return
    if args[0] == "mini":  # the miniature's commands: the recipe's own dispatch
        from sweet_rl.recipes.mini.commands import main as mini

        mini(args[1:])
        return
    stage = SHORT_NAMES.get(args[0].replace("-", "_"), args[0].replace("-", "_"))
    if stage not in STAGES:
        print(f"error: no stage named {args[0]!r}\n{usage()}", file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(f"sweet_rl.cli.{STAGES[stage]}")
    sys.argv = [stage] + args[1:]  # help names the command after sys.argv[0]
    module.main(args[1:])


if __name__ == "__main__":
    main()
