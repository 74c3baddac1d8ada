#!/usr/bin/env python
"""Score frontend trajectories by CLIP similarity; write rewards, optional pairs and win rate.

    python scripts/evaluate_html.py outputs/html.jsonl --k 2 \
        --ground_truth_preference_path outputs/pairs.jsonl

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.evaluate_html import main  # noqa: E402

if __name__ == "__main__":
    main()
