#!/usr/bin/env bash
# The quick miniature: the miniature reproduction on one task family with the short agent
# prompt, a 2-core CPU's minutes; used by the learning test and the demo (the recipe:
# sweet_rl/recipes/mini/quick.py; docs/mini_reproduction.md, "The quick miniature").
#
#   bash scripts/run_mini_quick.sh                                  # outputs/mini_quick, 3 seeds
#   SEEDS=0 METHODS=sweet BON_NS=8 bash scripts/run_mini_quick.sh   # the learning test's run
#
# The same as `sweet-rl mini quick`: the run's knobs (environment variables or flags; --help
# lists them) over the quick miniature's settings (QUICK in sweet_rl/recipes/mini/settings.py).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m sweet_rl.recipes.mini quick "$@"
