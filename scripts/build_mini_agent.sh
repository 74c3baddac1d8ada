#!/usr/bin/env bash
# The warm-started tiny agent of the miniature ColBench, on the CPU, with the project's own
# stages (the recipe: sweet_rl/recipes/mini/build_agent.py; docs/mini_warm_start.md).
#
#   bash scripts/build_mini_agent.sh                  # writes outputs/mini (agent: agent/)
#   OUT=outputs/mini_small TRAIN_TASKS=40 EPOCHS=1 MEASURE=0 bash scripts/build_mini_agent.sh
#
# The same as `sweet-rl mini build_agent`: every knob is a field of
# sweet_rl/recipes/mini/settings.py, set as an environment variable of its name in capitals
# (TRAIN_TASKS, EPOCHS, LR, COPY_MIN, JOBS, ...) or as a flag; --help lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m sweet_rl.recipes.mini build_agent "$@"
