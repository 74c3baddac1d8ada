#!/usr/bin/env bash
# Fills the wheel folder the GPU check (benchmarks/gpu_check.sh) installs from on a GPU machine
# that has no network. Run it where PyPI is reachable, with a Python that has torch (DeepSpeed's
# build imports it; nothing of it goes into the wheel):
#   bash benchmarks/gpu_wheels.sh           # fills benchmarks/gpu_wheels/ (ignored by git)
# The folder holds DeepSpeed built from its source package without ops (DS_BUILD_OPS=0, a
# py3-none-any wheel: an op is JIT-compiled when first used, and the check's steps use none)
# and what DeepSpeed and the stages need beyond the GPU machine's image (Python 3.12 with
# torch, transformers, accelerate, pytest, numpy, pillow, tqdm) as CPython 3.12 manylinux
# x86_64 wheels where binary, torchvision included: never torch, numpy or NVIDIA's libraries.
# requirements.txt there names what the check installs (pip resolves the rest from the folder);
# the torchvision wheel (TORCHVISION= leaves it out) goes in on its own and is kept only if it
# works with the machine's torch.
# The folder's size is printed; more than MAX_MIB fails (what travels with the tree to the GPU
# machine is 64 MiB in all).
set -euo pipefail
source "$(dirname "$0")/../scripts/help.sh" "$@"  # -h / --help: this header and the knobs
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-benchmarks/gpu_wheels}
PYTHON=${PYTHON:-python3}
DEEPSPEED=${DEEPSPEED:-deepspeed==0.19.8}  # the version the CPU tests run
EXTRA=${EXTRA:-"fire openai"}             # the project's own requirements that the image lacks
# the vision-language critic's processor needs torchvision: the release built for the image's
# torch (2.11.0, CUDA 13); the check keeps it only if its ops run there (empty: left out)
TORCHVISION=${TORCHVISION-torchvision==0.26.0}
MAX_MIB=${MAX_MIB:-48}
TARGET=(--python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --only-binary=:all:)

rm -rf "$WHEELS"
mkdir -p "$WHEELS"
# a wheel cached from a build with ops would be taken as is: no cache
DS_BUILD_OPS=0 "$PYTHON" -m pip wheel --no-cache-dir --no-deps --no-build-isolation \
    --no-binary deepspeed -w "$WHEELS" "$DEEPSPEED"
# DeepSpeed's own requirements, read off the wheel just built, less torch and numpy
needs=$("$PYTHON" - "$WHEELS" <<'EOF'
import glob, re, sys, zipfile

wheel = glob.glob(f"{sys.argv[1]}/deepspeed-*.whl")[0]
with zipfile.ZipFile(wheel) as archive:
    name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    lines = archive.read(name).decode().splitlines()
needs = [line.split(":", 1)[1].strip() for line in lines
         if line.startswith("Requires-Dist:") and "extra ==" not in line]
print(" ".join(n.replace(" ", "") for n in needs
               if re.split(r"[<>=!~;\[ ]", n)[0].lower() not in ("torch", "numpy")))
EOF
)
echo "DeepSpeed needs: $needs"
# shellcheck disable=SC2086  # one word per requirement
"$PYTHON" -m pip download --no-cache-dir -d "$WHEELS" "${TARGET[@]}" $needs $EXTRA
printf '%s\n' deepspeed $EXTRA > "$WHEELS/requirements.txt"
if [ -n "$TORCHVISION" ]; then  # alone: its requirements (torch, numpy, pillow) are the image's
  "$PYTHON" -m pip download --no-cache-dir --no-deps -d "$WHEELS" "${TARGET[@]}" "$TORCHVISION"
fi

bad=$(cd "$WHEELS" && ls | grep -iE '^(torch|numpy|nvidia|triton)[-_]' || true)
if [ -n "$bad" ]; then
  echo "gpu_wheels.sh: these must not travel (the GPU machine has its own): $bad" >&2
  exit 1
fi
ls -l "$WHEELS"
kib=$(du -sk "$WHEELS" | cut -f1)
echo "gpu_wheels.sh: $(ls "$WHEELS"/*.whl | wc -l) wheels, $(( kib / 1024 )) MiB ($kib KiB) in $WHEELS"
if [ "$kib" -gt $(( MAX_MIB * 1024 )) ]; then
  echo "gpu_wheels.sh: over MAX_MIB=$MAX_MIB MiB" >&2
  exit 1
fi
