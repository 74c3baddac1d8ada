#!/usr/bin/env python
"""Score every sampled candidate with the critic: judge_result = critic log-prob with the
ground-truth prefix - reference log-prob (SWEET-RL step 4).

    python scripts/rank_best_of_n.py --model_id outputs/tiny-llama \
        --input_path outputs/sampled.jsonl --output_path outputs/ranked.jsonl

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.rank_best_of_n import main  # noqa: E402

if __name__ == "__main__":
    main()
