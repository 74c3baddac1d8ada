#!/usr/bin/env python
"""Sample N candidate actions at every assistant turn of evaluated trajectories, with their
reference log-probs under the sampling model (SWEET-RL step 4).

    python scripts/sample_best_of_n.py outputs/offline.jsonl outputs/sampled.jsonl \
        --agent_model outputs/tiny-llama --best_of_n 4 --max_new_tokens 16

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.sample_best_of_n import main  # noqa: E402

if __name__ == "__main__":
    main()
