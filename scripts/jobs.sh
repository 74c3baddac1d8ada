# Running a recipe's independent stages side by side (sourced by the miniature's recipes; not a
# command of its own). The miniature's model is so small that one stage cannot keep two cores
# busy: most of its time is Python overhead and small matrix products, and every stage
# command first spends about 5 s importing torch and transformers. So instead of one stage at
# a time with every core, the recipes start stages that do not need each other's files as
# soon as a slot is free, JOBS at a time, each with THREADS torch threads.
#
# Results depend on THREADS (float sums are split differently), never on JOBS or on the order
# in which stages happen to run: every stage is seeded as before and reads only the files
# it names. So a run with JOBS=1 gives the same numbers as one with JOBS=8.
#
#   jobs_init                  # after PYTHON is set: JOBS slots, THREADS threads per stage
#   py ARGS...                 # "$PYTHON" ARGS... once a slot is free (the slot is held
#                              # until it ends); use it for every stage command
#   start NAME FUNCTION ARGS...  # FUNCTION ARGS... in the background, its output in
#                              # $LOGS/NAME.log; its process id in $STARTED_PID; the start
#                              # and end of every step, nested ones too, go to the recipe's
#                              # own output
#   finish PID...              # wait for these; fails (after all have ended) if any failed,
#                              # naming the failed ones and the tail of their logs
#   device_init                # after PYTHON is set: DEVICE_FLAG, the stages' --device flag

jobs_init() {
  JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}  # stages at once (default: one per core)
  THREADS=${THREADS:-1}                         # torch threads per stage (results depend on it)
  LOGS=${LOGS:-${OUT:-.}/logs}
  case "$JOBS" in ''|*[!0-9]*|0) echo "JOBS must be a positive number, got '$JOBS'" >&2; exit 2 ;; esac
  case "$THREADS" in ''|*[!0-9]*|0)
    echo "THREADS must be a positive number, got '$THREADS'" >&2; exit 2 ;;
  esac
  export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
  export TOKENIZERS_PARALLELISM=false  # the Rust tokenizer's own threads would compete too
  mkdir -p "$LOGS"
  exec 8>&1  # the recipe's own output: steps started in the background report there too
  # A pipe holding JOBS bytes: a stage takes one before it starts and puts it back when it
  # ends, whichever background shell started it (a counter in a variable would not be shared).
  local pipe
  pipe=$(mktemp -u "${TMPDIR:-/tmp}/sweet_rl_jobs.XXXXXX")
  mkfifo "$pipe"
  exec 9<>"$pipe"
  rm -f "$pipe"
  local slot
  for slot in $(seq "$JOBS"); do printf 'x' >&9; done
  NAMES_OF_PIDS=()
}

py() {
  local token rc=0
  read -r -n 1 token <&9
  "$PYTHON" "$@" || rc=$?
  printf 'x' >&9
  return "$rc"
}

start() {  # start NAME FUNCTION ARGS...
  local name=$1
  shift
  echo "[$(date +%H:%M:%S)] start $name (log: $LOGS/$name.log)" >&8
  ( set -euo pipefail; "$@" ) > "$LOGS/$name.log" 2>&1 &
  STARTED_PID=$!
  NAMES_OF_PIDS[$STARTED_PID]=$name
}

finish() {  # finish PID...: every one waited for, then a failure if any failed
  local pid failed=()
  for pid in "$@"; do
    if wait "$pid"; then
      echo "[$(date +%H:%M:%S)] done  ${NAMES_OF_PIDS[$pid]}" >&8
    else
      failed+=("${NAMES_OF_PIDS[$pid]}")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    local name
    for name in "${failed[@]}"; do
      echo "---- $name failed; the end of $LOGS/$name.log:" >&2
      tail -n 20 "$LOGS/$name.log" >&2
    done
    return 1
  fi
}

device_init() {  # DEVICE: where the stages' models run; DEVICE_FLAG passes it to them
  # Empty: each stage's default (cuda when a GPU is visible, else cpu). The trainings have no
  # --device: the Trainer takes a visible GPU by itself, so DEVICE=cpu hides the GPUs from every
  # stage, and DEVICE=cuda stops here when there is none (rather than training on the CPU).
  DEVICE=${DEVICE:-}
  DEVICE_FLAG=${DEVICE:+--device $DEVICE}
  case "$DEVICE" in
    "") ;;
    cpu) export CUDA_VISIBLE_DEVICES="" ;;
    cuda)
      if ! "$PYTHON" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
        echo "DEVICE=$DEVICE: torch sees no CUDA GPU here" >&2
        exit 2
      fi ;;
    *) echo "DEVICE must be cpu or cuda (empty: a GPU when there is one), got '$DEVICE'" >&2
       exit 2 ;;
  esac
}
