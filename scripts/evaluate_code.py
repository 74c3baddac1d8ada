#!/usr/bin/env python
"""Grade backend trajectories in a sandbox; write rewards and optional preference pairs.

    python scripts/evaluate_code.py outputs/demo.jsonl --k 2 \
        --ground_truth_preference_path outputs/pairs.jsonl

See ``sweet_rl/cli/evaluate_code.py`` (or ``--help``) for every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.common import run_cli  # noqa: E402
from sweet_rl.cli.evaluate_code import main  # noqa: E402

if __name__ == "__main__":
    run_cli(main)
