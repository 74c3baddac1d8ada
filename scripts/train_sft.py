#!/usr/bin/env python
"""Supervised fine-tuning on successful trajectories (rejection fine-tuning).

    python scripts/train_sft.py --config configs/rft_backend.json \
        --pretrain MODEL --dataset FILE.jsonl --save_path OUT
    deepspeed --num_gpus 8 scripts/train_sft.py --config configs/rft_backend.json \
        --pretrain MODEL --dataset FILE.jsonl --save_path OUT

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.train_sft import main  # noqa: E402

if __name__ == "__main__":
    main()
