#!/usr/bin/env python
"""Simulate ColBench dialogues (agent x simulated human) into a trajectory JSONL.

    python scripts/simulate_interactions.py --output_path outputs/demo.jsonl --max_new_tokens 32

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.simulate import main  # noqa: E402

if __name__ == "__main__":
    main()
