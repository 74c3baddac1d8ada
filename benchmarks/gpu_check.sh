#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py; docs/benchmarks.md, "GPU"): on a GPU machine with no
# network, from a fresh copy of the repository with the wheel folder that
# benchmarks/gpu_wheels.sh fills, in at most 8 minutes:
#   bash benchmarks/gpu_check.sh                      # figures in $OUT (else outputs/gpu_check)
#   bash benchmarks/gpu_check.sh --dry_run --out DIR  # every step on the CPU, tiny sizes
# PYTHON picks the interpreter (default: python3, else python).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3 || command -v python)}
exec "$PYTHON" benchmarks/gpu_check.py "$@"
