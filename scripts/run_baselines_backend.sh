#!/usr/bin/env bash
# The paper's backend baselines from the same offline data: rejection fine-tuning (SFT on the
# successful trajectories) and multi-turn DPO (trajectory-level pairs, loss on every agent turn).
#
#   DATA_PATH=data/colbench_code_offline_15k_llama8b.jsonl AGENT_MODEL=/models/Llama-3.1-8B-Instruct \
#   SIM_HOST=sim-node SIM_MODEL=/models/Llama-3.1-70B-Instruct bash scripts/run_baselines_backend.sh
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."

DATA_PATH=${DATA_PATH:-hf://facebook/collaborative_agent_bench/colbench_code_offline_15k_llama8b.jsonl}
TEST_TASKS=${TEST_TASKS:-hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl}
OUTPUT_DIR=${OUTPUT_DIR:-outputs/baselines_backend}
CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints/baselines_backend}
AGENT_MODEL=${AGENT_MODEL:-meta-llama/Llama-3.1-8B-Instruct}
SIM_HOST=${SIM_HOST:-localhost}
SIM_PORT=${SIM_PORT:-8000}
SIM_MODEL=${SIM_MODEL:-meta-llama/Llama-3.1-70B-Instruct}
NUM_GPUS=${NUM_GPUS:-8}
BACKEND=${BACKEND:-vllm}
K=${K:-3}
NUM_TEST_TASKS=${NUM_TEST_TASKS:-1000}
LAUNCH=${LAUNCH:-"deepspeed --num_gpus $NUM_GPUS"}
EXTRA_TRAIN_ARGS=${EXTRA_TRAIN_ARGS:-}
EXTRA_SIM_ARGS=${EXTRA_SIM_ARGS:-}
SIM_FLAGS=${SIM_FLAGS:-"--hostname $SIM_HOST --port $SIM_PORT --env_model $SIM_MODEL"}

mkdir -p "$OUTPUT_DIR" "$CHECKPOINT_DIR"
OFFLINE=$OUTPUT_DIR/offline.jsonl
TRAJ_PAIRS=$OUTPUT_DIR/trajectory_pairs.jsonl
RFT=$CHECKPOINT_DIR/rft
MTDPO=$CHECKPOINT_DIR/multiturn_dpo

echo "== 0. offline data -> $OFFLINE"
[ -f "$OFFLINE" ] || python scripts/download_data.py "$DATA_PATH" "$OFFLINE"
echo "== 1. rewards and trajectory pairs (no reference solution) -> $TRAJ_PAIRS"
python scripts/evaluate_code.py "$OFFLINE" --k "$K" --preference_path "$TRAJ_PAIRS"

echo "== 2. rejection fine-tuning -> $RFT"
$LAUNCH scripts/train_sft.py --config configs/rft_backend.json --pretrain "$AGENT_MODEL" \
    --dataset "$OFFLINE" --save_path "$RFT" $EXTRA_TRAIN_ARGS
echo "== 3. multi-turn DPO -> $MTDPO"
$LAUNCH scripts/train_dpo.py --config configs/multiturn_dpo_backend.json --pretrain "$AGENT_MODEL" \
    --dataset "$TRAJ_PAIRS" --save_path "$MTDPO" $EXTRA_TRAIN_ARGS

for name in rft multiturn_dpo; do
    echo "== evaluation of $name -> $OUTPUT_DIR/evaluation_$name.jsonl"
    python scripts/simulate_interactions.py --agent_model "$CHECKPOINT_DIR/$name" \
        --agent_backend "$BACKEND" $SIM_FLAGS --input_path "$TEST_TASKS" \
        --num_tasks "$NUM_TEST_TASKS" --output_path "$OUTPUT_DIR/evaluation_$name.jsonl" \
        --overwrite $EXTRA_SIM_ARGS
    python scripts/evaluate_code.py "$OUTPUT_DIR/evaluation_$name.jsonl"
done
echo "files: offline=$OFFLINE trajectory_pairs=$TRAJ_PAIRS rft=$RFT multiturn_dpo=$MTDPO"
echo "       evaluations=$OUTPUT_DIR/evaluation_{rft,multiturn_dpo}.jsonl"
