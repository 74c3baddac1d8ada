"""The GPU check's install step (benchmarks/gpu_check.py): what the machine's image lacks goes
in from the wheel folder that benchmarks/gpu_wheels.sh fills, with no network and without
touching the image's torch; the project itself goes in with ``--no-deps``.
"""

from __future__ import annotations

import glob
import os

from gpu_runner import StepFailed, last_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEEDED = ["deepspeed", "fire"]  # beyond the machine's image, when the wheel folder has no list

ABSENT = ("import importlib.metadata as m, json, sys\n"
          "def absent(name):\n    try:\n        m.distribution(name)\n"
          "    except m.PackageNotFoundError:\n        return True\n    return False\n"
          "print(json.dumps({'absent': [n for n in sys.argv[1:] if absent(n)]}))")


def install(ctx) -> dict:
    """A virtual environment that sees the machine's packages (or the interpreter's own
    environment where that cannot be), the wheel folder's requirements and torchvision if it
    works there; then checks that DeepSpeed and fire import and that torch is still the
    machine's. Later steps use this environment even when this step fails."""
    base, venv = ctx.facts["python"], os.path.join(ctx.work, "venv")
    python = os.path.join(venv, "bin", "python")
    try:  # the machine's packages stay visible (and used): only what they lack is added
        if ctx.facts.get("in_venv"):  # a venv on top would see the base's packages, not these
            raise StepFailed("the interpreter already runs in a virtual environment")
        ctx.run([base, "-m", "venv", "--system-site-packages", "--without-pip", venv])
        ctx.run([python, "-c", "import pip, torch"])
    except StepFailed:  # into the interpreter's own environment (a fresh machine's, or a venv)
        python = base
        ctx.env["PIP_BREAK_SYSTEM_PACKAGES"] = "1"
    ctx.facts["python"] = python
    wheels = ctx.facts["wheels"]
    listed = os.path.join(wheels, "requirements.txt")
    needed = open(listed).read().split() if os.path.exists(listed) else NEEDED
    files = sorted(f for f in glob.glob(os.path.join(wheels, "*.whl"))
                   if not os.path.basename(f).startswith("torchvision-"))
    try:
        ctx.run(pip_install(python) + ["--find-links", wheels] + needed)
        resolved = True
    except StepFailed:  # pip also re-checks torch's own requirements (DeepSpeed needs torch):
        # where the machine's environment does not meet one of them, pip looks for another
        # torch and finds none. Then the folder's wheels of the projects missing here go in
        # as they are, and the imports below tell whether that was enough.
        resolved = False
        names = [os.path.basename(f).split("-")[0] for f in files]
        absent = last_json(ctx.run([python, "-c", ABSENT] + names))["absent"]
        if absent:
            missing = [f for f, n in zip(files, names) if n in absent]
            ctx.run(pip_install(python) + ["--no-deps"] + missing)
    vision = _torchvision(ctx, python)
    probe = ("import json, deepspeed, fire, torch; print(json.dumps({'deepspeed': "
             "deepspeed.__version__, 'torch': torch.__version__}))")
    found = last_json(ctx.run([python, "-c", probe]))
    if found["torch"] != ctx.facts.get("torch", found["torch"]):
        raise StepFailed(f"the install replaced torch {ctx.facts['torch']} by {found['torch']}")
    every = glob.glob(os.path.join(wheels, "*.whl"))
    return dict(found, python=python, venv=python != base, requirements=needed, resolved=resolved,
                torchvision=vision, wheels=len(every),
                wheels_mib=round(sum(map(os.path.getsize, every)) / 2**20, 1))


def project(ctx) -> dict:
    """The project, editable, with ``--no-deps``; ``sweet_rl`` must then import from this tree
    with no PYTHONPATH, from another folder. (The other steps also have the tree on
    PYTHONPATH, so they run whether or not this step passes.)"""
    python = ctx.facts["python"]
    ctx.run(pip_install(python) + ["--no-deps", "--no-build-isolation", "-e", REPO])
    probe = "import json, sweet_rl; print(json.dumps({'sweet_rl': sweet_rl.__file__}))"
    found = last_json(ctx.run([python, "-c", probe], env={"PYTHONPATH": ""}, cwd=ctx.work))
    if not found["sweet_rl"].startswith(REPO):
        raise StepFailed(f"sweet_rl imports from {found['sweet_rl']}, not this tree")
    return found


def pip_install(python: str) -> list:
    """pip install from the wheel folder or local paths only: the GPU machine has no network."""
    return [python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check"]


def _torchvision(ctx, python: str) -> str:
    """The vision-language critic's processor needs torchvision (transformers loads no Qwen2-VL
    processor without it), which is built for one torch release and one CUDA version: the
    folder's wheel goes in as it is and stays only if its compiled ops run here."""
    try:
        ctx.run([python, "-c", "import torchvision"])
        return "present"
    except StepFailed:
        pass
    wheel = glob.glob(os.path.join(ctx.facts["wheels"], "torchvision-*.whl"))
    if not wheel:
        return "absent (no wheel in the folder)"
    try:
        ctx.run(pip_install(python) + ["--no-deps"] + wheel)
    except StepFailed as err:  # e.g. a wheel for another Python
        return f"not installed: {err}"
    works = ("import torch, torchvision\nd = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
             "torchvision.ops.nms(torch.zeros(1, 4, device=d), torch.ones(1, device=d), 0.5)\n"
             "print('torchvision', torchvision.__version__, 'works on', d)")
    try:
        return ctx.run([python, "-c", works]).strip().splitlines()[-1]
    except StepFailed as err:
        ctx.run([python, "-m", "pip", "uninstall", "-y", "torchvision"])
        return f"removed again: {err}"
