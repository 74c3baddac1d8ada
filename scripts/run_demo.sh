#!/usr/bin/env bash
# The embedded default, on the CPU with no network and tiny local models:
#   mini (the default): SWEET-RL learning, on the quick miniature ColBench
#           (scripts/run_mini_quick.sh): a tiny agent warm-started on scripted dialogues, its zero-shot held-out success,
#           offline data -> critic with the reference -> 8 candidates per turn -> rank ->
#           pairs -> agent DPO, the trained agent's held-out success (with BON_NS=8 also the
#           critic's Best-of-8 against random choice); ends with the small table;
#   part 1 (PART=1): simulate -> evaluate -> view on the bundled sample backend tasks, a tiny
#           random model playing both the agent and the simulated human (it scores about 0);
#   part 2 (PART=2): the paper-scale script scripts/run_sweet_backend.sh with CPU settings:
#           offline trajectories -> evaluate with pairs -> critic -> sample -> rank -> pair ->
#           agent DPO -> simulate and evaluate with the trained agent. A random tiny model
#           never solves a task, so it starts from scripted offline dialogues in which some
#           rollouts succeed (sweet_rl/data/offline_demo.py); every stage still runs for real.
#
# Part 3, frontend design, runs only when asked for (PART=3): it needs the html extra, Chromium
# and the Tailwind cache (pip install -e ".[html]"; apt-get install chromium chromium-driver;
# python -m sweet_rl.rendering.assets). CLIP has random weights there (no download), so
# its similarities mean nothing; the scripted offline pages still give the critic its pairs.
#
#   bash scripts/run_demo.sh            # writes outputs/demo/mini/ (the learning)
#   OUT=outputs/demo1 PART=1 bash scripts/run_demo.sh   # part 1 only
#   PART="1 2 mini" bash scripts/run_demo.sh        # several parts
#   PART=3 bash scripts/run_demo.sh     # frontend: simulate -> evaluate -> view, then SWEET-RL
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/demo}
PART=${PART:-mini}                     # mini, 1, 2, 3, or several ("1 2")
wants() { case " $PART " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for part in $PART; do
  case "$part" in
    1|2|3|mini) ;;
    *) echo "run_demo.sh: unknown PART '$part'; choose from mini 1 2 3 (several: PART=\"1 2\")" >&2
       exit 2 ;;
  esac
done
ROLLOUTS=${ROLLOUTS:-2}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-64}
mkdir -p "$OUT"
# (tail: a library may log to stdout on import)
TINY=$(python -c "from sweet_rl.models.tiny_model import ensure_tiny_model; print(ensure_tiny_model())" | tail -n 1)
TASKS=$(python -c "from sweet_rl.data.tasks import SAMPLE_BACKEND_TASKS; print(SAMPLE_BACKEND_TASKS)" | tail -n 1)

if wants 1; then
  echo "== part 1: simulate -> evaluate -> view ($OUT)"
  python scripts/simulate_interactions.py \
      --output_path "$OUT/trajectories.jsonl" --overwrite \
      --best_of_n "$ROLLOUTS" --max_new_tokens "$MAX_NEW_TOKENS" --simulator_max_tokens 64
  python scripts/evaluate_code.py "$OUT/trajectories.jsonl" --k "$ROLLOUTS" \
      --ground_truth_preference_path "$OUT/critic_pairs.jsonl"
  python visualizers/visualize_dialogue_histories.py "$OUT/trajectories.jsonl" "$OUT/dialogues.html"
fi

if wants 2; then
  SWEET=$OUT/sweet
  echo "== part 2: the SWEET-RL loop on the CPU ($SWEET)"
  mkdir -p "$SWEET"
  python -m sweet_rl.cli.offline_demo "$SWEET/offline.jsonl" --tokenizer "$TINY"
  OUTPUT_DIR=$SWEET CHECKPOINT_DIR=$SWEET/checkpoints AGENT_MODEL=$TINY BACKEND=hf K=3 \
  NUM_SAMPLES=${NUM_SAMPLES:-4} DATA_FRACTION=1.0 TEST_TASKS=$TASKS NUM_TEST_TASKS=6 \
  LAUNCH=python SIM_FLAGS="--simulator_max_tokens 32" \
  EXTRA_SIM_ARGS="--max_new_tokens ${SAMPLE_TOKENS:-16}" \
  EXTRA_TRAIN_ARGS="--zero_stage 0 --bf16 False --gradient_checkpointing False --flash_attn False \
--learning_rate 1e-4 --max_len 1024 --train_batch_size 2 --micro_train_batch_size 1 --max_epochs 1 \
--report_to none" \
      bash scripts/run_sweet_backend.sh
  python visualizers/visualize_dialogue_histories.py "$SWEET/evaluation.jsonl" \
      "$SWEET/dialogues.html" > /dev/null
  echo "part 2: the trained agent's final evaluation dialogues in $SWEET/dialogues.html"
fi
if wants 3; then
  HTML=$OUT/frontend
  FRONTEND_TASKS=$(python -c "from sweet_rl.data.tasks import SAMPLE_FRONTEND_TASKS; print(SAMPLE_FRONTEND_TASKS)" | tail -n 1)
  echo "== part 3: frontend simulate -> evaluate -> view, then the SWEET-RL loop ($HTML)"
  mkdir -p "$HTML"
  python scripts/simulate_interactions.py --task_type html \
      --output_path "$HTML/trajectories.jsonl" --overwrite --best_of_n "$ROLLOUTS" \
      --max_steps "${HTML_STEPS:-3}" --max_new_tokens "$MAX_NEW_TOKENS" --simulator_max_tokens 32
  python scripts/evaluate_html.py "$HTML/trajectories.jsonl" --k "$ROLLOUTS" --clip_pretrained none
  python visualizers/visualize_design_dialogue_histories.py "$HTML/trajectories.jsonl" "$HTML/dialogues.html"
  python -m sweet_rl.cli.offline_demo "$HTML/sweet/offline.jsonl" --tokenizer "$TINY" --task_type html
  OUTPUT_DIR=$HTML/sweet CHECKPOINT_DIR=$HTML/sweet/checkpoints AGENT_MODEL=$TINY BACKEND=hf K=3 \
  NUM_SAMPLES=${NUM_SAMPLES:-4} DATA_FRACTION=1.0 TEST_TASKS=$FRONTEND_TASKS NUM_TEST_TASKS=3 \
  LAUNCH=python CLIP_ARGS="--clip_pretrained none" VLM_CRITIC_MODEL=tiny \
  SIM_FLAGS="--simulator_max_tokens 32 --max_steps ${HTML_STEPS:-3}" \
  EXTRA_SIM_ARGS="--max_new_tokens ${SAMPLE_TOKENS:-16}" \
  EXTRA_TRAIN_ARGS="--zero_stage 0 --bf16 False --gradient_checkpointing False --flash_attn False \
--learning_rate 1e-4 --max_len 2048 --train_batch_size 2 --micro_train_batch_size 1 --max_epochs 1 \
--report_to none" \
      bash scripts/run_sweet_frontend.sh
fi
if wants mini; then
  echo "== mini: SWEET-RL learns on the quick miniature ColBench ($OUT/mini)"
  # BON_NS=8 adds the critic's Best-of-8 against random choice (BON_ROLLOUTS=3: 3 dialogues per
  # task, as the learning test; about half a minute more, as it runs beside the agent's DPO)
  OUT=$OUT/mini SEEDS=0 METHODS=sweet BON_NS=${BON_NS-} BON_CRITICS=${BON_CRITICS-} \
      bash scripts/run_mini_quick.sh
fi
VIEW=$OUT/dialogues.html
wants 3 && VIEW=$OUT/frontend/dialogues.html
if wants 1 || wants 3; then
  echo "demo: files in $OUT (open $VIEW in a browser)"
fi
if wants mini; then  # the learning, last: the held-out success before and after SWEET-RL
  python visualizers/visualize_dialogue_histories.py "$OUT/mini/seed0/eval_sweet.jsonl" \
      "$OUT/mini/dialogues_sweet.html" > /dev/null
  echo "mini: the trained agent's dialogues in $OUT/mini/dialogues_sweet.html"
  cat "$OUT/mini/table.md"
fi
