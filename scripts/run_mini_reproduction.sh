#!/usr/bin/env bash
# The miniature reproduction: on the miniature ColBench (sweet_rl/recipes/mini/tasks.py,
# scripted human), every method of the paper's Table 2 trained from the same warm-started tiny
# agent with the project's real stages and files, on the CPU, then a table of held-out
# success and tests passed over seeds (sweet_rl/recipes/mini/table.py).
#
# Per seed, all from the warm agent W and the same offline data:
#   zero-shot       W itself
#   rft             SFT on the offline dialogues that passed every test
#   multiturn_dpo   DPO on trajectory pairs, loss on every agent turn
#   sweet           critic with the reference (training-time information) -> N candidates per
#                   turn -> critic ranking -> per-turn pairs -> agent DPO
#   sweet_no_gt     ablation: the critic without the reference (trained and ranking on `input`)
#   sweet_sum       ablation: summed instead of per-token mean log-probs, critic and ranking
#
#   bash scripts/run_mini_reproduction.sh                 # outputs/mini_repro, 3 seeds
#   WARM=outputs/mini bash scripts/run_mini_reproduction.sh   # from a built warm agent
#   OUT=outputs/mr_small SEEDS="0" OFFLINE_TASKS=40 TEST_TASKS=30 BON_NS=1,4 bash scripts/run_mini_reproduction.sh
#
# Choices that differ from the paper-scale configs, and why (docs/mini_reproduction.md):
#   - the rank stage and the Best-of-N curve score the candidate's tokens only
#     (--score_tokens candidate, the paper's description): the original's span averages over
#     the whole dialogue, which leaves judge_result ~ -(the agent's own log-prob) and ranked
#     the miniature's candidates worse than chance against an oracle;
#   - learning rates for a model this small (the paper's 2e-7 would move it nowhere);
#   - trajectory-level training (critic and multi-turn DPO, same pairs) runs TRAJ_EPOCHS,
#     the per-turn agent DPO AGENT_EPOCHS (1, as the paper), RFT SFT_EPOCHS;
#   - every agent is evaluated EVAL_ROLLOUTS times per held-out task at temperature 1.0.
#
# Stages that do not need each other's files run side by side (scripts/jobs.sh): JOBS at once
# (default: one per core), each with THREADS torch threads (default 1). The numbers depend on
# THREADS only, not on JOBS. Each stage's output is in OUT/logs/<seed>.<step>.log.
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."
source scripts/jobs.sh
OUT=${OUT:-outputs/mini_repro}
PYTHON=${PYTHON:-python}
SEEDS=${SEEDS:-"0 1 2"}
OFFLINE_TASKS=${OFFLINE_TASKS:-120}     # train tasks the offline data is collected on
K=${K:-3}                               # rollouts per task in the offline data
TEST_TASKS=${TEST_TASKS:-40}            # held-out tasks each agent is evaluated on
EVAL_ROLLOUTS=${EVAL_ROLLOUTS:-3}       # dialogues per held-out task (temperature 1.0)
NUM_SAMPLES=${NUM_SAMPLES:-8}           # candidates per turn for the critic to rank
DATA_FRACTION=${DATA_FRACTION:-0.5}     # share of the offline trajectories sampled per turn
NUM_PAIRS=${NUM_PAIRS:-2}               # per-turn pairs drawn from each ranked turn
SCORE_TOKENS=${SCORE_TOKENS:-candidate} # the critic's scored span (see the top of this file)
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-192}
CRITIC_LR=${CRITIC_LR:-1e-3}
AGENT_LR=${AGENT_LR:-1e-4}              # multi-turn DPO and SWEET-RL's agent DPO
SFT_LR=${SFT_LR:-1e-3}
TRAJ_EPOCHS=${TRAJ_EPOCHS:-4}           # critic and multi-turn DPO (trajectory pairs)
AGENT_EPOCHS=${AGENT_EPOCHS:-1}         # SWEET-RL's per-turn agent DPO
SFT_EPOCHS=${SFT_EPOCHS:-2}             # rejection fine-tuning
BON_NS=${BON_NS-1,2,4,8,16}            # Best-of-N curve (first seed only; BON_NS= skips it)
BON_ROLLOUTS=${BON_ROLLOUTS:-1}         # dialogues per held-out task at each point of the curve
BON_CRITICS=${BON_CRITICS-"regression value judge"}  # more curves: the regression head and the
# value function (critics trained for the curve only) and LLM-as-a-Judge (the warm agent)
for extra in $BON_CRITICS; do
  case "$extra" in
    regression|value|judge) ;;
    *) echo "run_mini_reproduction.sh: unknown BON_CRITICS entry '$extra'; choose from" \
            "regression value judge" >&2
       exit 2 ;;
  esac
done
WARM=${WARM:-$OUT/warm}                 # the warm agent's folder (built once, then reused)
METHODS=${METHODS:-"rft multiturn_dpo sweet sweet_no_gt sweet_sum"}  # trained after zero-shot
# OFFLINE_FROM: a trajectory file in simulate's layout (K rollouts per task), graded or not,
# used as every seed's offline data instead of collecting it with the warm agent
has() { case " $METHODS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for method in $METHODS; do
  has_known=0
  for known in rft multiturn_dpo sweet sweet_no_gt sweet_sum; do
    [ "$method" = "$known" ] && has_known=1
  done
  if [ "$has_known" = 0 ]; then
    echo "run_mini_reproduction.sh: unknown method '$method' in METHODS; choose from" \
         "rft multiturn_dpo sweet sweet_no_gt sweet_sum" >&2
    exit 2
  fi
done

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}  # stages at once (scripts/jobs.sh)
THREADS=${THREADS:-1}                   # torch threads per stage; the numbers depend on it
SAMPLE_SHARDS=${SAMPLE_SHARDS:-$JOBS}   # pieces the candidates are sampled in, side by side
# (merged byte for byte into the single run's file: the numbers do not depend on it)
MICRO=${MICRO:-1}                       # rows per forward pass in every training (batch 8
# accumulated: the same update as MICRO=8 up to float rounding, without the padding)
DEVICE=${DEVICE:-}                      # cpu or cuda for every stage (scripts/jobs.sh; empty:
# a GPU when one is visible)
device_init  # checks DEVICE before anything is written
mkdir -p "$OUT"
jobs_init
STARTED=$(date +%s)

# The warm agent, shared by every seed (scripts/build_mini_agent.sh, which reads its own
# TRAIN_TASKS, MIX, EPOCHS, LR...; TEST_TASKS, JOBS and THREADS are shared; reused when present).
if [ ! -f "$WARM/agent/config.json" ]; then
  OUT=$WARM MEASURE=0 PYTHON=$PYTHON LOGS=$LOGS JOBS=$JOBS THREADS=$THREADS MICRO=$MICRO \
      DEVICE=$DEVICE bash scripts/build_mini_agent.sh
fi
AGENT=$WARM/agent

TRAIN_FLAGS="--zero_stage 0 --bf16 False --gradient_checkpointing False --flash_attn False \
--max_len 1024 --train_batch_size 8 --micro_train_batch_size $MICRO --eval_holdout 0 --report_to none \
--lr_warmup_ratio 0.05"
SIM="--env_model scripted --temperature 1.0 --max_new_tokens $MAX_NEW_TOKENS $DEVICE_FLAG"
PROMPT_FLAG=""  # the agent's system message the warm agent was trained with
if [ -f "$WARM/agent_prompt.txt" ]; then
  PROMPT_FLAG="--agent_prompt_path $WARM/agent_prompt.txt"
  SIM="$SIM $PROMPT_FLAG"
fi
FIRST_SEED=$(echo $SEEDS | cut -d' ' -f1)

evaluate() {  # evaluate NAME MODEL SEED DIR: held-out success of one agent
  local name=$1 model=$2 seed=$3 dir=$4
  py scripts/simulate_interactions.py --agent_model "$model" $SIM \
      --input_path "$WARM/test_tasks.jsonl" --num_tasks "$TEST_TASKS" \
      --best_of_n "$EVAL_ROLLOUTS" --batch_size "$(( TEST_TASKS * EVAL_ROLLOUTS ))" \
      --output_path "$dir/eval_$name.jsonl" --overwrite --seed "$seed"
  py scripts/evaluate_code.py "$dir/eval_$name.jsonl" --k "$EVAL_ROLLOUTS"
}

train_critic() {  # train_critic NAME SEED DIR PAIRS FLAGS...: a critic from the warm agent
  local name=$1 seed=$2 dir=$3 pairs=$4
  shift 4
  py scripts/train_dpo.py --config configs/critic_backend.json --pretrain "$AGENT" \
      --dataset "$pairs" --save_path "$dir/critic_$name" --seed "$seed" $TRAIN_FLAGS \
      --max_epochs "$TRAJ_EPOCHS" --learning_rate "$CRITIC_LR" "$@"
}

sweet_agent() {  # sweet_agent NAME SEED DIR RANK_FLAGS: rank with its critic -> pairs -> DPO
  local name=$1 seed=$2 dir=$3 rank_flags=$4
  py scripts/rank_best_of_n.py --model_id "$dir/critic_$name" \
      --input_path "$dir/sampled.jsonl" --output_path "$dir/ranked_$name.jsonl" --overwrite \
      --score_tokens "$SCORE_TOKENS" $rank_flags $DEVICE_FLAG
  # how far the critic's ranking agrees with the miniature's oracle (a diagnostic only)
  py -m sweet_rl.recipes.mini.critic_check "$dir/ranked_$name.jsonl"
  py scripts/generate_random_pairs_from_ranks.py "$dir/ranked_$name.jsonl" \
      "$dir/agent_pairs_$name.jsonl" --no_prompt --num_pairs "$NUM_PAIRS" --tokenizer "$AGENT" \
      --seed "$seed"
  py scripts/train_dpo.py --config configs/agent_dpo_backend.json --pretrain "$AGENT" \
      --dataset "$dir/agent_pairs_$name.jsonl" --save_path "$dir/$name" --seed "$seed" \
      $TRAIN_FLAGS --max_epochs "$AGENT_EPOCHS" --learning_rate "$AGENT_LR"
  evaluate "$name" "$dir/$name" "$seed" "$dir"
}

rejection_fine_tuning() {  # rejection_fine_tuning SEED DIR
  local seed=$1 dir=$2
  if "$PYTHON" -c "import json, sys; sys.exit(not any(json.loads(line).get('reward', 0) >= 1
                   for line in open(sys.argv[1]) if line.strip()))" "$dir/offline.jsonl"; then
    py scripts/train_sft.py --config configs/rft_backend.json --pretrain "$AGENT" \
        --dataset "$dir/offline.jsonl" --save_path "$dir/rft" --seed "$seed" $TRAIN_FLAGS \
        --max_epochs "$SFT_EPOCHS" --learning_rate "$SFT_LR"
    evaluate rft "$dir/rft" "$seed" "$dir"
  else  # nothing to clone: the row is left out of the table rather than faked
    echo "rft: no offline dialogue passed every test; skipped for seed $seed"
  fi
}

multiturn_dpo() {  # multiturn_dpo SEED DIR
  local seed=$1 dir=$2
  py scripts/train_dpo.py --config configs/multiturn_dpo_backend.json \
      --pretrain "$AGENT" --dataset "$dir/trajectory_pairs.jsonl" \
      --save_path "$dir/multiturn_dpo" --seed "$seed" $TRAIN_FLAGS \
      --max_epochs "$TRAJ_EPOCHS" --learning_rate "$AGENT_LR"
  evaluate multiturn_dpo "$dir/multiturn_dpo" "$seed" "$dir"
}

extra_critic() {  # extra_critic KIND SEED DIR: a critic of Figure 3a for the Best-of-N curve only
  local kind=$1 seed=$2 dir=$3
  case "$kind" in
    regression)  # Table 3's head, on the SWEET critic's pairs
      train_critic regression "$seed" "$dir" "$dir/critic_pairs.jsonl" --critic_head regression ;;
    value)  # Figure 3a's value function: every turn labelled with its dialogue's success
      train_critic value "$seed" "$dir" "$dir/offline.jsonl" --critic_head value ;;
  esac
}

best_of_n_curve() {  # best_of_n_curve SEED DIR: Figure 3a with every critic trained for it
  local seed=$1 dir=$2 critics="" extra
  if has sweet; then critics="--critic $dir/critic_sweet"; fi
  if has sweet_no_gt; then critics="$critics --critic_no_gt $dir/critic_sweet_no_gt"; fi
  for extra in $BON_CRITICS; do
    case "$extra" in
      regression|value) critics="$critics --critic_$extra $dir/critic_$extra" ;;
      judge) critics="$critics --judge $AGENT" ;;  # the agent's base model judges
    esac
  done
  py -m sweet_rl.recipes.mini.best_of_n --agent_model "$AGENT" \
      --tasks "$WARM/test_tasks.jsonl" --num_tasks "$TEST_TASKS" --output_dir "$dir" \
      $critics $PROMPT_FLAG --ns "$BON_NS" \
      --seed "$seed" --max_new_tokens "$MAX_NEW_TOKENS" --rollouts "$BON_ROLLOUTS" \
      --score_tokens "$SCORE_TOKENS" $DEVICE_FLAG
}

sample_candidates() {  # sample_candidates SEED DIR: NUM_SAMPLES replies per offline turn
  local seed=$1 dir=$2 shard pids=() pieces=()
  local flags=(--agent_model "$AGENT" --best_of_n "$NUM_SAMPLES" --data_fraction "$DATA_FRACTION"
               --max_new_tokens "$MAX_NEW_TOKENS" --seed "$seed" --overwrite $DEVICE_FLAG)
  if [ "$SAMPLE_SHARDS" = 1 ]; then
    py scripts/sample_best_of_n.py "$dir/offline.jsonl" "$dir/sampled.jsonl" "${flags[@]}"
    return
  fi
  for shard in $(seq 0 $(( SAMPLE_SHARDS - 1 ))); do
    pieces+=("$dir/sampled.shard$shard.jsonl")
    start "seed$seed.sample$shard" py scripts/sample_best_of_n.py "$dir/offline.jsonl" \
        "$dir/sampled.shard$shard.jsonl" "${flags[@]}" --num_shards "$SAMPLE_SHARDS" \
        --shard_index "$shard"
    pids+=("$STARTED_PID")
  done
  finish "${pids[@]}"
  py scripts/merge_shards.py "${pieces[@]}" --output_path "$dir/sampled.jsonl" --overwrite
  for shard in "${pieces[@]}"; do rm -f "$shard" "$shard.config.json"; done
}

# One seed: every method from the warm agent and this seed's offline data. Runs in the
# background beside the other seeds; its own stages start as soon as their inputs exist.
seed_run() {  # seed_run SEED
  local seed=$1 dir=$OUT/seed$1 waiting=() critic_of=() variant kind
  mkdir -p "$dir"
  start "seed$seed.zero_shot" evaluate zero_shot "$AGENT" "$seed" "$dir"
  waiting+=("$STARTED_PID")

  if [ -n "${OFFLINE_FROM:-}" ]; then
    echo "offline data from $OFFLINE_FROM ($K rollouts per task)"
    cp "$OFFLINE_FROM" "$dir/offline.jsonl"
  else
    echo "offline data: $K rollouts on $OFFLINE_TASKS train tasks"
    py scripts/simulate_interactions.py --agent_model "$AGENT" $SIM \
        --input_path "$WARM/train_tasks.jsonl" --num_tasks "$OFFLINE_TASKS" --best_of_n "$K" \
        --batch_size "$OFFLINE_TASKS" --output_path "$dir/offline.jsonl" --overwrite \
        --seed "$seed"
  fi
  py scripts/evaluate_code.py "$dir/offline.jsonl" --k "$K" \
      --preference_path "$dir/trajectory_pairs.jsonl" \
      --ground_truth_preference_path "$dir/critic_pairs.jsonl"

  # everything below needs only the offline data (and the warm agent)
  if has rft; then
    start "seed$seed.rft" rejection_fine_tuning "$seed" "$dir"
    waiting+=("$STARTED_PID")
  fi
  if has multiturn_dpo; then
    start "seed$seed.multiturn_dpo" multiturn_dpo "$seed" "$dir"
    waiting+=("$STARTED_PID")
  fi
  if has sweet; then
    start "seed$seed.critic_sweet" train_critic sweet "$seed" "$dir" "$dir/critic_pairs.jsonl"
    critic_of[0]=$STARTED_PID
  fi
  if has sweet_no_gt; then
    start "seed$seed.critic_sweet_no_gt" train_critic sweet_no_gt "$seed" "$dir" \
        "$dir/trajectory_pairs.jsonl"
    critic_of[1]=$STARTED_PID
  fi
  if has sweet_sum; then
    start "seed$seed.critic_sweet_sum" train_critic sweet_sum "$seed" "$dir" \
        "$dir/critic_pairs.jsonl" --mean_log_prob False
    critic_of[2]=$STARTED_PID
  fi
  local curve=0 extras=()
  if [ -n "$BON_NS" ] && [ "$seed" = "$FIRST_SEED" ]; then
    curve=1
    for kind in $BON_CRITICS; do
      if [ "$kind" != judge ]; then
        start "seed$seed.critic_$kind" extra_critic "$kind" "$seed" "$dir"
        extras+=("$STARTED_PID")
      fi
    done
  fi

  if has sweet || has sweet_no_gt || has sweet_sum; then
    echo "SWEET-RL and its ablations: $NUM_SAMPLES candidates per turn"
    sample_candidates "$seed" "$dir"
  fi
  local index=0 rank_flags
  for variant in sweet sweet_no_gt sweet_sum; do
    if has "$variant"; then
      finish "${critic_of[$index]}"
      case "$variant" in
        sweet) rank_flags="" ;;
        sweet_no_gt) rank_flags="--no_use_ground_truth" ;;
        sweet_sum) rank_flags="--use_sum" ;;
      esac
      start "seed$seed.$variant" sweet_agent "$variant" "$seed" "$dir" "$rank_flags"
      waiting+=("$STARTED_PID")
    fi
    index=$(( index + 1 ))
  done
  if [ "$curve" = 1 ]; then
    echo "the critics' Best-of-N curve (N = $BON_NS)"
    if [ ${#extras[@]} -gt 0 ]; then finish "${extras[@]}"; fi
    best_of_n_curve "$seed" "$dir"
  fi
  finish "${waiting[@]}"
}

seed_pids=()
for seed in $SEEDS; do
  start "seed$seed" seed_run "$seed"
  seed_pids+=("$STARTED_PID")
done
finish "${seed_pids[@]}"

"$PYTHON" -m sweet_rl.recipes.mini.table "$OUT" --seconds "$(( $(date +%s) - STARTED ))"
