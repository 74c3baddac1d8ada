#!/usr/bin/env bash
# SWEET-RL on backend programming, stage by stage (the paper's recipe).
#
#   DATA_PATH=data/colbench_code_offline_15k_llama8b.jsonl AGENT_MODEL=/models/Llama-3.1-8B-Instruct \
#   SIM_HOST=sim-node SIM_MODEL=/models/Llama-3.1-70B-Instruct NUM_GPUS=8 bash scripts/run_sweet_backend.sh
#
# Every stage reads the previous stage's file; hyperparameters come from configs/*.json.
# Set LAUNCH="python" and EXTRA_TRAIN_ARGS="--zero_stage 0" to train without DeepSpeed, e.g. on one CPU/GPU.
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."

DATA_PATH=${DATA_PATH:-hf://facebook/collaborative_agent_bench/colbench_code_offline_15k_llama8b.jsonl}
TEST_TASKS=${TEST_TASKS:-hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl}
OUTPUT_DIR=${OUTPUT_DIR:-outputs/sweet_backend}
CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints/sweet_backend}
SIM_MODEL=${SIM_MODEL:-meta-llama/Llama-3.1-70B-Instruct}
NUM_TEST_TASKS=${NUM_TEST_TASKS:-1000}

source scripts/sweet_stages.sh
sweet_rl_defaults  # the knobs both recipes share (GPUs, backend, K, samples, extra args…)
sweet_rl_paths

echo "== 0. offline data -> $OFFLINE"
[ -f "$OFFLINE" ] || python scripts/download_data.py "$DATA_PATH" "$OFFLINE"

echo "== 1. trajectory pairs with the reference solution -> $CRITIC_PAIRS"
python scripts/evaluate_code.py "$OFFLINE" --k "$K" --ground_truth_preference_path "$CRITIC_PAIRS"

sweet_rl_stages configs/critic_backend.json configs/agent_dpo_backend.json

echo "== 7. evaluation of the trained agent -> $EVALUATION"
python scripts/simulate_interactions.py --agent_model "$AGENT" --agent_backend "$BACKEND" \
    $SIM_FLAGS --input_path "$TEST_TASKS" --num_tasks "$NUM_TEST_TASKS" \
    --output_path "$EVALUATION" --overwrite $EXTRA_SIM_ARGS
python scripts/evaluate_code.py "$EVALUATION"

echo "files: offline=$OFFLINE critic_pairs=$CRITIC_PAIRS critic=$CRITIC sampled=$SAMPLED"
echo "       ranked=$RANKED agent_pairs=$AGENT_PAIRS agent=$AGENT evaluation=$EVALUATION"
