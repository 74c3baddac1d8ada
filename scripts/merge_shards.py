#!/usr/bin/env python
"""Join the shard files of a run split over nodes (--num_shards/--shard_index) into the one
file a single run would have written, after checking that the shards match and are complete.

    python scripts/merge_shards.py outputs/sampled.shard0.jsonl outputs/sampled.shard1.jsonl \
        --output_path outputs/sampled.jsonl

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.merge import main  # noqa: E402

if __name__ == "__main__":
    main()
