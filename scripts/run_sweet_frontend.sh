#!/usr/bin/env bash
# SWEET-RL on frontend design, stage by stage (the paper's recipe).
#
#   TRAIN_TASKS=data/frontend_tasks/train.jsonl TEST_TASKS=data/frontend_tasks/test.jsonl \
#   AGENT_MODEL=/models/Llama-3.1-8B-Instruct SIM_HOST=sim-node SIM_MODEL=Qwen/Qwen2-VL-72B-Instruct \
#   NUM_GPUS=8 bash scripts/run_sweet_frontend.sh
#
# Tasks come from scripts/prepare_frontend_tasks.py (+ scripts/filter_websites.py). The offline
# data is simulated here (K rollouts per training task) unless OFFLINE already exists. The
# critic is a text model (the agent's checkpoint) that reads the dialogue and the reference
# HTML; the paper's frontend critic is a vision-language model (see docs/reproducing.md).
# Every stage reads the previous stage's file; hyperparameters come from configs/*.json.
# Set LAUNCH="python" and EXTRA_TRAIN_ARGS="--zero_stage 0" to train without DeepSpeed.
set -euo pipefail
cd "$(dirname "$0")/.."

TRAIN_TASKS=${TRAIN_TASKS:-data/frontend_tasks/train.jsonl}
TEST_TASKS=${TEST_TASKS:-data/frontend_tasks/test.jsonl}
OUTPUT_DIR=${OUTPUT_DIR:-outputs/sweet_frontend}
CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints/sweet_frontend}
SIM_MODEL=${SIM_MODEL:-Qwen/Qwen2-VL-72B-Instruct}
NUM_TRAIN_TASKS=${NUM_TRAIN_TASKS:-10000}
NUM_TEST_TASKS=${NUM_TEST_TASKS:-500}
REFERENCE_RUN=${REFERENCE_RUN:-}       # an evaluated run on the same test tasks (e.g. GPT-4o's): win rate
CLIP_ARGS=${CLIP_ARGS:-}               # e.g. "--clip_pretrained none" offline (random CLIP: demo only)
source scripts/sweet_stages.sh
sweet_rl_defaults  # the knobs both recipes share (GPUs, backend, K, samples, extra args…)
sweet_rl_paths

echo "== 0. offline dialogues, $K per training task -> $OFFLINE"
if [ ! -f "$OFFLINE" ] || [ -f "$OFFLINE.partial" ]; then
  touch "$OFFLINE.partial"  # a killed simulation resumes (--to_continue) on the next run
  python scripts/simulate_interactions.py --task_type html --agent_model "$AGENT_MODEL" \
      --agent_backend "$BACKEND" $SIM_FLAGS --input_path "$TRAIN_TASKS" \
      --num_tasks "$NUM_TRAIN_TASKS" --best_of_n "$K" --output_path "$OFFLINE" --to_continue \
      $EXTRA_SIM_ARGS
  rm -f "$OFFLINE.partial"
fi

echo "== 1. CLIP rewards and trajectory pairs with the reference page -> $CRITIC_PAIRS"
python scripts/evaluate_html.py "$OFFLINE" --k "$K" --ground_truth_preference_path "$CRITIC_PAIRS" \
    $CLIP_ARGS

sweet_rl_stages configs/critic_frontend.json configs/agent_dpo_frontend.json

echo "== 7. evaluation of the trained agent -> $EVALUATION"
python scripts/simulate_interactions.py --task_type html --agent_model "$AGENT" \
    --agent_backend "$BACKEND" $SIM_FLAGS --input_path "$TEST_TASKS" \
    --num_tasks "$NUM_TEST_TASKS" --output_path "$EVALUATION" --overwrite $EXTRA_SIM_ARGS
WIN_RATE=()
[ -n "$REFERENCE_RUN" ] && WIN_RATE=(--reference_path "$REFERENCE_RUN")
python scripts/evaluate_html.py "$EVALUATION" "${WIN_RATE[@]}" $CLIP_ARGS

echo "files: offline=$OFFLINE critic_pairs=$CRITIC_PAIRS critic=$CRITIC sampled=$SAMPLED"
echo "       ranked=$RANKED agent_pairs=$AGENT_PAIRS agent=$AGENT evaluation=$EVALUATION"
