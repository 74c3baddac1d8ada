# What run_sweet_backend.sh and run_sweet_frontend.sh share (sourced by them; not a command of
# its own): the recipe's file layout and stages 2-6. The stages read the variables those
# scripts set:
# LAUNCH AGENT_MODEL CRITIC_PAIRS CRITIC OFFLINE SAMPLED RANKED AGENT_PAIRS AGENT NUM_SAMPLES
# DATA_FRACTION BACKEND EXTRA_TRAIN_ARGS EXTRA_SIM_ARGS CRITIC_ARGS RANK_ARGS.
#
#   sweet_rl_defaults                         # after the recipe's own SIM_MODEL is set
#   sweet_rl_paths                            # after OUTPUT_DIR and CHECKPOINT_DIR are set
#   sweet_rl_stages CRITIC_CONFIG AGENT_CONFIG

# Defaults of the knobs both recipes share; each can be set in the environment.
sweet_rl_defaults() {
  AGENT_MODEL=${AGENT_MODEL:-meta-llama/Llama-3.1-8B-Instruct}
  SIM_HOST=${SIM_HOST:-localhost}
  SIM_PORT=${SIM_PORT:-8000}
  NUM_GPUS=${NUM_GPUS:-8}
  BACKEND=${BACKEND:-vllm}               # agent inference backend: vllm on GPUs, hf on the CPU
  K=${K:-3}                              # rollouts per task in the offline data
  NUM_SAMPLES=${NUM_SAMPLES:-16}         # candidates per turn
  DATA_FRACTION=${DATA_FRACTION:-0.1}    # share of the offline trajectories sampled (the paper: 10%)
  LAUNCH=${LAUNCH:-"deepspeed --num_gpus $NUM_GPUS"}
  EXTRA_TRAIN_ARGS=${EXTRA_TRAIN_ARGS:-}  # e.g. "--learning_rate 1e-4 --max_epochs 1" for the CPU demo
  EXTRA_SIM_ARGS=${EXTRA_SIM_ARGS:-}      # e.g. "--max_new_tokens 64" for the CPU demo
  CRITIC_ARGS=${CRITIC_ARGS:-}            # ablation "sum instead of mean": "--mean_log_prob False"
  RANK_ARGS=${RANK_ARGS:-}                # ablations: "--no_use_ground_truth"; "--use_sum";
                                          # critic span: "--score_tokens turn|candidate" (default original)
  SIM_FLAGS=${SIM_FLAGS:-"--hostname $SIM_HOST --port $SIM_PORT --env_model $SIM_MODEL"}
}

# The recipe's files under OUTPUT_DIR and CHECKPOINT_DIR; OFFLINE may be given beforehand.
sweet_rl_paths() {
  mkdir -p "$OUTPUT_DIR" "$CHECKPOINT_DIR"
  OFFLINE=${OFFLINE:-$OUTPUT_DIR/offline.jsonl}
  CRITIC_PAIRS=$OUTPUT_DIR/critic_pairs.jsonl
  CRITIC=$CHECKPOINT_DIR/critic
  SAMPLED=$OUTPUT_DIR/sampled.jsonl
  RANKED=$OUTPUT_DIR/ranked.jsonl
  AGENT_PAIRS=$OUTPUT_DIR/agent_pairs.jsonl
  AGENT=$CHECKPOINT_DIR/agent
  EVALUATION=$OUTPUT_DIR/evaluation.jsonl
}

sweet_rl_stages() {
  local critic_config=$1 agent_config=$2

  echo "== 2. critic -> $CRITIC"
  $LAUNCH scripts/train_dpo.py --config "$critic_config" --pretrain "$AGENT_MODEL" \
      --dataset "$CRITIC_PAIRS" --save_path "$CRITIC" $EXTRA_TRAIN_ARGS $CRITIC_ARGS

  echo "== 3. $NUM_SAMPLES candidates per turn on a $DATA_FRACTION share of the offline data -> $SAMPLED"
  python scripts/sample_best_of_n.py "$OFFLINE" "$SAMPLED" --agent_model "$AGENT_MODEL" \
      --best_of_n "$NUM_SAMPLES" --data_fraction "$DATA_FRACTION" --backend "$BACKEND" \
      --to_continue $EXTRA_SIM_ARGS

  echo "== 4. critic ranking -> $RANKED"
  python scripts/rank_best_of_n.py --model_id "$CRITIC" --input_path "$SAMPLED" \
      --output_path "$RANKED" --backend "$BACKEND" --to_continue $RANK_ARGS

  echo "== 5. per-turn pairs -> $AGENT_PAIRS"
  python scripts/generate_random_pairs_from_ranks.py "$RANKED" "$AGENT_PAIRS" --no_prompt \
      --num_pairs 4 --tokenizer "$AGENT_MODEL"

  echo "== 6. agent DPO -> $AGENT"
  $LAUNCH scripts/train_dpo.py --config "$agent_config" --pretrain "$AGENT_MODEL" \
      --dataset "$AGENT_PAIRS" --save_path "$AGENT" $EXTRA_TRAIN_ARGS
}
