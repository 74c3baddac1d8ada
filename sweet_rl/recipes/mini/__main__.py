"""``python -m sweet_rl.recipes.mini <command>``: the same as ``sweet-rl mini <command>``."""

from sweet_rl.recipes.mini.commands import main

main()
