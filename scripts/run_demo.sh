#!/usr/bin/env bash
# The embedded default: simulate -> evaluate -> view on the bundled sample backend tasks, with
# the tiny local model as both agent and simulated human, on the CPU, with no network.
#
#   bash scripts/run_demo.sh            # writes outputs/demo/
#   OUT=/tmp/demo bash scripts/run_demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/demo}
ROLLOUTS=${ROLLOUTS:-2}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-64}
mkdir -p "$OUT"

python scripts/simulate_interactions.py \
    --output_path "$OUT/trajectories.jsonl" --overwrite \
    --best_of_n "$ROLLOUTS" --max_new_tokens "$MAX_NEW_TOKENS" --simulator_max_tokens 64
python scripts/evaluate_code.py "$OUT/trajectories.jsonl" --k "$ROLLOUTS" \
    --ground_truth_preference_path "$OUT/critic_pairs.jsonl"
python visualizers/visualize_dialogue_histories.py "$OUT/trajectories.jsonl" "$OUT/dialogues.html"
echo "demo: files in $OUT (open $OUT/dialogues.html in a browser)"
