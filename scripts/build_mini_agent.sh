#!/usr/bin/env bash
# The warm-started tiny agent of the miniature ColBench, on the CPU, with the
# project's own stages:
#   1. mini_warm_start: a fresh tiny Llama (local tokenizer), train and held-out test tasks,
#      one scripted dialogue per train task in a mix of styles (askers, guessers, wasters);
#   2. evaluate_code.py: the real grader writes each dialogue's reward;
#   3. train_sft.py with --min_reward 0: SFT on *every* dialogue, not only the successful
#      ones, so the agent clones the mix and succeeds only when it happens to play the asker
#      (with DRILL_EPOCHS > 0, first on the recall drills alone: a curriculum); JOBS
#      trainings with other data orders side by side, the first that copies told details
#      (mini_copy_check) is kept;
#   4. (MEASURE=1, the default) simulate_interactions.py with the scripted human on the
#      held-out tasks at temperature 1.0, then evaluate_code.py: the zero-shot success.
#
#   bash scripts/build_mini_agent.sh                  # writes outputs/mini (agent: agent/)
#   OUT=outputs/mini_small TRAIN_TASKS=40 EPOCHS=1 MEASURE=0 bash scripts/build_mini_agent.sh
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."
source scripts/jobs.sh
OUT=${OUT:-outputs/mini}
PYTHON=${PYTHON:-python}
# defaults: the four-family build of docs/mini_warm_start.md (15.0% held-out success at
# temperature 1.0, about 10 minutes on 2 cores)
TRAIN_TASKS=${TRAIN_TASKS:-245}
TEST_TASKS=${TEST_TASKS:-40}
MIX=${MIX:-asker=0.35,guesser=0.3,waster=0.35}
HIDDEN=${HIDDEN:-128}
LAYERS=${LAYERS:-2}
TIE=${TIE:-True}
DRILLS=${DRILLS:-2000}
EPOCHS=${EPOCHS:-8}
LR=${LR:-3e-3}
BATCH=${BATCH:-8}
MICRO=${MICRO:-1}        # rows per forward pass (BATCH/MICRO accumulated: the same update,
                         # less padding: about half the time of MICRO=8 on the CPU)
DRILL_EPOCHS=${DRILL_EPOCHS:-0}  # epochs on the recall drills alone before the whole set
SEED=${SEED:-0}
MEASURE=${MEASURE:-1}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}
FAMILIES=${FAMILIES:-}   # e.g. late_fee: only these task families (default: all four)
AGENT_PROMPT=${AGENT_PROMPT:-auto}  # the agent's system message: auto (bundled), mini (short), a path
TRIES=${TRIES:-4}        # SFT runs (with other data orders) until the agent copies told details
COPY_MIN=${COPY_MIN:-0.8}  # share of told train dialogues it must answer right (0: no check)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}  # trainings side by side (scripts/jobs.sh)
THREADS=${THREADS:-1}    # torch threads per stage; the agent depends on it
LOGS=${LOGS:-$OUT/logs}  # each training's output
DEVICE=${DEVICE:-}       # cpu or cuda for every stage (scripts/jobs.sh; empty: a GPU when
                         # one is visible)

device_init  # checks DEVICE before anything is written
mkdir -p "$OUT"
jobs_init
py -m sweet_rl.recipes.mini.warm_start "$OUT" --num_train_tasks "$TRAIN_TASKS" \
    --num_test_tasks "$TEST_TASKS" --mix "$MIX" --seed "$SEED" \
    --hidden_size "$HIDDEN" --num_layers "$LAYERS" --tie_embeddings "$TIE" --num_drills "$DRILLS" \
    --agent_prompt_path "$AGENT_PROMPT" ${FAMILIES:+--families "$FAMILIES"}
py scripts/evaluate_code.py "$OUT/warm_start.jsonl" --k 1
# the graded dialogues and the recall drills (reward 1.0, never graded) are one SFT set
cat "$OUT/warm_start.jsonl" "$OUT/drills.jsonl" > "$OUT/sft.jsonl"
# A model this small learns from scratch: a learning rate far above the paper's 2e-7, small
# batches for more updates, several epochs; no held-out share (every dialogue is data).
# The copy (writing back what was told) is learnt in a sudden jump whose timing depends on the
# seed and on the machine's float kernels, so the agent is checked on told train dialogues
# (sweet_rl/recipes/mini/copy_check.py) and trained again, from the same base model and data in
# another order (training seed SEED + 1000 x try), when it does not copy: up to TRIES
# trainings (COPY_MIN=0 skips the check). Trainings run JOBS at a time (scripts/jobs.sh), and
# the first try in order that copies is kept, so the agent does not depend on JOBS.
sft() {  # sft FROM DATASET EPOCHS SAVE SEED: one SFT stage with the recipe's settings
  py scripts/train_sft.py --pretrain "$1" --dataset "$2" --max_epochs "$3" --save_path "$4" \
      --seed "$5" --min_reward 0 --learning_rate "$LR" --train_batch_size "$BATCH" \
      --micro_train_batch_size "$MICRO" --max_len 1024 --lr_warmup_ratio 0.05 --eval_holdout 0 \
      --zero_stage 0 --bf16 False --gradient_checkpointing False --flash_attn False \
      --report_to none
}
train_try() {  # train_try TRY: the SFT into OUT/try<TRY>, then its copy check
  local try=$1 seed=$(( SEED + 1000 * $1 )) from=$OUT/base
  if [ "$DRILL_EPOCHS" != 0 ]; then  # the drills alone first: where the copy is learnt
    sft "$OUT/base" "$OUT/drills.jsonl" "$DRILL_EPOCHS" "$OUT/try$try.drills" "$seed"
    from=$OUT/try$try.drills
  fi
  sft "$from" "$OUT/sft.jsonl" "$EPOCHS" "$OUT/try$try" "$seed"
  if [ "$COPY_MIN" != 0 ]; then
    py -m sweet_rl.recipes.mini.copy_check "$OUT/try$try" "$OUT/train_tasks.jsonl" \
        --agent_prompt_path "$OUT/agent_prompt.txt" --output_path "$OUT/try$try.copy_check.json" \
        $DEVICE_FLAG
  fi
}
copies() {  # copies TRY: whether that training's copy check met COPY_MIN
  [ "$COPY_MIN" = 0 ] || "$PYTHON" -c "import json, sys
sys.exit(json.load(open(sys.argv[1]))['share'] < float(sys.argv[2]))" \
      "$OUT/try$1.copy_check.json" "$COPY_MIN"
}
rm -rf "$OUT"/try[0-9]* "$OUT/agent"
kept=""
first=0
while [ -z "$kept" ] && [ "$first" -lt "$TRIES" ]; do
  # the next trainings, JOBS of them side by side (one when there is no check to fail)
  last=$(( first + JOBS - 1 ))
  [ "$COPY_MIN" = 0 ] && last=$first
  [ "$last" -ge "$TRIES" ] && last=$(( TRIES - 1 ))
  pids=()
  for try in $(seq "$first" "$last"); do
    start "warm.sft_try$try" train_try "$try"
    pids+=("$STARTED_PID")
  done
  finish "${pids[@]}"
  for try in $(seq "$first" "$last"); do
    [ "$COPY_MIN" = 0 ] || grep -h "^mini_copy_check:" "$LOGS/warm.sft_try$try.log" || true
    if copies "$try"; then
      kept=$try
      break
    fi
    if [ "$try" -lt $(( TRIES - 1 )) ]; then
      echo "warm start: training seed $(( SEED + 1000 * try )) did not learn the copy; training" \
           "again with seed $(( SEED + 1000 * (try + 1) ))"
    fi
  done
  first=$(( last + 1 ))
done
if [ -z "$kept" ]; then
  echo "build_mini_agent.sh: the agent did not learn to copy told details (share below" \
       "COPY_MIN=$COPY_MIN) in $TRIES trainings; raise TRIES or EPOCHS" >&2
  exit 1
fi
mv "$OUT/try$kept" "$OUT/agent"
if [ "$COPY_MIN" != 0 ]; then
  mv "$OUT/try$kept.copy_check.json" "$OUT/copy_check.json"
  mv "$OUT/try$kept.copy_check.json.config.json" "$OUT/copy_check.json.config.json"
fi
rm -rf "$OUT"/try[0-9]*
echo "warm start: kept training seed $(( SEED + 1000 * kept ))"

if [ "$MEASURE" = 1 ]; then
  "$PYTHON" scripts/simulate_interactions.py --agent_model "$OUT/agent" --env_model scripted \
      --agent_prompt_path "$OUT/agent_prompt.txt" \
      --input_path "$OUT/test_tasks.jsonl" --num_tasks "$TEST_TASKS" \
      --output_path "$OUT/test.jsonl" --overwrite --temperature 1.0 \
      --max_new_tokens "$MAX_NEW_TOKENS" --batch_size "$TEST_TASKS" --seed "$SEED" $DEVICE_FLAG
  "$PYTHON" scripts/evaluate_code.py "$OUT/test.jsonl" --k 1
fi
echo "mini agent: $OUT/agent"
