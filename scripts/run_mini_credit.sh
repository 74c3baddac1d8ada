#!/usr/bin/env bash
# Where credit over turns decides: the control (the quick miniature, basic late_fee family)
# and the followup family (a detail only a follow-up question reveals), side by side on one
# pool of slots, each at matched gradient steps, the followup side with the data-scaling sweep;
# then both tables (the recipe: sweet_rl/recipes/mini/credit.py; docs/mini_reproduction.md,
# "Credit assignment: two families side by side").
#
#   bash scripts/run_mini_credit.sh                  # outputs/mini_credit/{control,followup}
#   SEEDS=0 bash scripts/run_mini_credit.sh          # one seed of each
#
# The same as `sweet-rl mini credit`: the run's knobs (environment variables or flags; --help
# lists them) reach both sides; CONTROL_OFFLINE_FROM and FOLLOWUP_OFFLINE_FROM give each side
# its own offline file.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m sweet_rl.recipes.mini credit "$@"
