#!/usr/bin/env python
"""Grade backend trajectories in a sandbox; write rewards and optional preference pairs.

    python scripts/evaluate_code.py outputs/demo.jsonl --k 2 \
        --ground_truth_preference_path outputs/pairs.jsonl

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.evaluate_code import main  # noqa: E402

if __name__ == "__main__":
    main()
