#!/usr/bin/env python
"""Per-turn DPO pairs, chosen from the top half and rejected from the bottom half by
judge_result, or SFT records of each turn's best candidate (SWEET-RL step 5).

    python scripts/generate_random_pairs_from_ranks.py outputs/ranked.jsonl \
        outputs/agent_pairs.jsonl \
        --no_prompt --num_pairs 4 --tokenizer outputs/tiny-llama

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.generate_random_pairs import main  # noqa: E402

if __name__ == "__main__":
    main()
