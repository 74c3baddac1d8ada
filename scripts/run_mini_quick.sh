#!/usr/bin/env bash
# The quick miniature: scripts/run_mini_reproduction.sh on a smaller miniature that
# a 2-core CPU runs in minutes, used by the learning test (tests/test_mini_learning.py) and
# the demo (scripts/run_demo.sh):
#   - one task family (late_fee: a fee per day, a grace period and a cap to ask about;
#     135 train and 33 held-out combinations of hidden values) instead of four;
#   - the short agent prompt (sweet_rl/recipes/mini/agent_prompt.txt, 62 tokens instead
#     of 269), so every row is less than half as long;
#   - a warm agent trained as a curriculum: 5 epochs on the 2000 recall drills alone, where
#     the copy of told values is learnt, then 3 on the dialogues and drills together (2051
#     updates in all: 1250 + 801), about 5.5 minutes on 2 cores for two trainings side by side
#     (build_mini_agent.sh keeps the first that copies; DRILL_EPOCHS=0 EPOCHS=6 trains on
#     everything at once, which learns the copy on fewer training seeds);
#   - a lower learning rate for the agent's DPO (3e-5 instead of 1e-4): this warm agent already
#     succeeds about half the time, and 1e-4 teaches it to stop answering (15% success);
#   - the Best-of-N curve with the two log-prob critics and random choice only, to stay
#     under 30 minutes: BON_CRITICS="regression value judge" adds Figure 3a's other critics (two
#     more critic trainings and three more curves).
# Every other setting is run_mini_reproduction.sh's, and any of its variables (SEEDS, METHODS,
# BON_NS, ...) or build_mini_agent.sh's can still be set.
#
#   bash scripts/run_mini_quick.sh                              # outputs/mini_quick, 3 seeds
#   SEEDS=0 METHODS=sweet BON_NS=8 bash scripts/run_mini_quick.sh   # the learning test's run
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."
export OUT=${OUT:-outputs/mini_quick}
export FAMILIES=${FAMILIES:-late_fee}
export AGENT_PROMPT=${AGENT_PROMPT:-mini}
export TRAIN_TASKS=${TRAIN_TASKS:-135}
export TEST_TASKS=${TEST_TASKS:-33}
export DRILLS=${DRILLS:-2000}
export DRILL_EPOCHS=${DRILL_EPOCHS:-5}
export EPOCHS=${EPOCHS:-3}
export OFFLINE_TASKS=${OFFLINE_TASKS:-120}
export AGENT_LR=${AGENT_LR:-3e-5}
export BON_CRITICS=${BON_CRITICS-}
exec bash scripts/run_mini_reproduction.sh
