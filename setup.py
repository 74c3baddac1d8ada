"""sweet_rl: SWEET-RL and the ColBench benchmark, reimplemented."""

from setuptools import find_packages, setup

EXTRAS = {
    # offline inference for the agent, sample and rank stages on GPUs (0.6.5 to today's
    # releases, sweet_rl/models/vllm_engine.py); on the CPU, vLLM's CPU build lives in its own
    # environment (scripts/vllm_env.sh)
    "vllm": ["vllm>=0.6"],
    # frontend design: rendering and CLIP scoring
    # (open_clip needs torchvision built for the installed torch: see .ci/run; datasets reads
    # WebSight for scripts/prepare_frontend_tasks.py)
    "html": ["selenium>=4.10", "open_clip_torch>=2.20", "torchvision", "pillow>=9",
             "datasets>=2.14"],
    # `transformers serve` as a local OpenAI-compatible simulator server
    "serving": ["transformers[serving]>=4.57"],
    # training the critic and the agent (transformers.Trainer needs accelerate; DeepSpeed for
    # ZeRO; its CPU backend JIT-compiles a small op on first use: a C++ compiler is needed)
    "train": ["accelerate>=1.0", "deepspeed>=0.15"],
    # beautifulsoup4 and numpy: imported by ColBench reference solutions (conformance test)
    # ruff: the style test (tests/test_style.py) checks the settings in pyproject.toml
    # pytest-xdist: the suite runs on two workers (addopts in pyproject.toml)
    # fire: the GPU check's install step checks it imports (benchmarks/gpu_install.py); its CPU
    # dry run (tests/test_gpu_check.py) finds it in the test environment
    "dev": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5", "selenium>=4.10",
            "transformers[serving]>=4.57", "beautifulsoup4>=4.9", "numpy>=1.24", "ruff>=0.5",
            "fire>=0.5"],
}
# The tests run the training stages, DeepSpeed's launcher included (ZeRO-3 on the CPU), and
# the frontend stages (Chromium rendering, CLIP on random weights, WebSight-shaped local files).
EXTRAS["dev"] += EXTRAS["train"] + EXTRAS["html"]

setup(
    name="sweet_rl",
    version="0.1.0",
    description="SWEET-RL and ColBench: multi-turn collaborative agents, reimplemented",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=find_packages(include=["sweet_rl", "sweet_rl.*"]),
    package_data={"sweet_rl": ["prompts/*.txt", "prompts/*.json", "tiny_corpus/*.txt",
                               "data/*.jsonl", "recipes/mini/*.txt"]},
    python_requires=">=3.10",
    install_requires=[
        "torch>=2.1",
        "transformers>=4.57",
        "tokenizers>=0.20",
        "huggingface_hub>=0.25",
        "openai>=1.40",
        "tqdm>=4.60",
        "accelerate>=1.0",  # transformers.Trainer, used by the demo's training stages
    ],
    extras_require=EXTRAS,
    # `sweet-rl <stage> [flags]`: the same stages as scripts/*.py (see sweet_rl/cli/main.py)
    entry_points={"console_scripts": ["sweet-rl = sweet_rl.cli.main:main"]},
)
