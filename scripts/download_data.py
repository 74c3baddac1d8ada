#!/usr/bin/env python
"""Copy a ColBench file from the hub (hf://OWNER/DATASET/FILE) or a path to a working copy.

python scripts/download_data.py \
        hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl data/backend_test.jsonl
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.download_data import main  # noqa: E402

if __name__ == "__main__":
    main()
