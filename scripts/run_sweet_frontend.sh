#!/usr/bin/env bash
# SWEET-RL on frontend design, stage by stage (the paper's recipe).
#
#   TRAIN_TASKS=data/frontend_tasks/train.jsonl TEST_TASKS=data/frontend_tasks/test.jsonl \
#   AGENT_MODEL=/models/Llama-3.1-8B-Instruct SIM_HOST=sim-node SIM_MODEL=Qwen/Qwen2-VL-72B-Instruct \
#   NUM_GPUS=8 bash scripts/run_sweet_frontend.sh
#
# Tasks come from scripts/prepare_frontend_tasks.py (+ scripts/filter_websites.py). The offline
# data is simulated here (K rollouts per training task) unless OFFLINE already exists. The
# critic is the paper's: a vision-language model (VLM_CRITIC_MODEL) with a regression head
# that sees the rendered reference page with the dialogue, trained with Bradley-Terry on the
# trajectory pairs and scoring every candidate with its task's reference screenshot.
# CRITIC_KIND=text trains our text option instead: a log-prob critic from the agent's
# checkpoint that reads the reference HTML (docs/differences.md).
# Every stage reads the previous stage's file; hyperparameters come from configs/*.json.
# Set LAUNCH="python" and EXTRA_TRAIN_ARGS="--zero_stage 0" to train without DeepSpeed.
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
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
CRITIC_KIND=${CRITIC_KIND:-vlm}        # vlm: the paper's vision-language critic; text: our text log-prob critic
VLM_CRITIC_MODEL=${VLM_CRITIC_MODEL:-Qwen/Qwen2-VL-7B-Instruct}  # the vlm critic's start (tiny: a CPU toy)
source scripts/sweet_stages.sh
sweet_rl_defaults  # the knobs both recipes share (GPUs, backend, K, samples, extra args…)
sweet_rl_paths

case "$CRITIC_KIND" in
  vlm)
    if [ "$VLM_CRITIC_MODEL" = tiny ]; then  # the embedded tiny Qwen2-VL, built once
      VLM_CRITIC_MODEL=$(python -c \
          "from sweet_rl.models.tiny_vlm import ensure_tiny_vlm; print(ensure_tiny_vlm())" | tail -n 1)
    fi
    PAIR_FLAG=--vlm_preference_path  # each side: the reference screenshot and the dialogue
    # stage 2 (sweet_stages.sh) names the agent as --pretrain; this later --pretrain wins
    CRITIC_ARGS="--critic_head vlm_regression --pretrain $VLM_CRITIC_MODEL $CRITIC_ARGS"
    # the rank stage looks each turn's reference screenshot up in the evaluated offline data
    RANK_ARGS="--critic_type vlm_regression --screenshots_from $OFFLINE $RANK_ARGS"
    ;;
  text) PAIR_FLAG=--ground_truth_preference_path ;;
  *) echo "CRITIC_KIND must be vlm or text, got '$CRITIC_KIND'" >&2; exit 2 ;;
esac

echo "== 0. offline dialogues, $K per training task -> $OFFLINE"
if [ ! -f "$OFFLINE" ] || [ -f "$OFFLINE.partial" ]; then
  touch "$OFFLINE.partial"  # a killed simulation resumes (--to_continue) on the next run
  python scripts/simulate_interactions.py --task_type html --agent_model "$AGENT_MODEL" \
      --agent_backend "$BACKEND" $SIM_FLAGS --input_path "$TRAIN_TASKS" \
      --num_tasks "$NUM_TRAIN_TASKS" --best_of_n "$K" --output_path "$OFFLINE" --to_continue \
      $EXTRA_SIM_ARGS
  rm -f "$OFFLINE.partial"
fi

echo "== 1. CLIP rewards and trajectory pairs with the reference page ($CRITIC_KIND critic) -> $CRITIC_PAIRS"
python scripts/evaluate_html.py "$OFFLINE" --k "$K" "$PAIR_FLAG" "$CRITIC_PAIRS" $CLIP_ARGS

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
