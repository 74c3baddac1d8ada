#!/usr/bin/env bash
# The miniature reproduction: every method of the paper's Table 2 from one warm-started tiny
# agent on the miniature ColBench, over seeds, then the table and the Best-of-N curve
# (the recipe: sweet_rl/recipes/mini/reproduction.py; docs/mini_reproduction.md).
#
#   bash scripts/run_mini_reproduction.sh                      # outputs/mini_repro, 3 seeds
#   WARM=outputs/mini bash scripts/run_mini_reproduction.sh    # from a built warm agent
#   OUT=outputs/mr_small SEEDS="0" OFFLINE_TASKS=40 TEST_TASKS=30 BON_NS=1,4 bash scripts/run_mini_reproduction.sh
#
# The same as `sweet-rl mini run`: every knob is a field of sweet_rl/recipes/mini/settings.py,
# set as an environment variable of its name in capitals (SEEDS, METHODS, JOBS, THREADS,
# DEVICE, ...) or as a flag (bash scripts/run_mini_reproduction.sh --seeds 0); --help lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m sweet_rl.recipes.mini run "$@"
