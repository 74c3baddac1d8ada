#!/usr/bin/env python
"""Preference training (critic, agent DPO, multi-turn DPO baseline).

    python scripts/train_dpo.py --config configs/critic_backend.json \
        --pretrain MODEL --dataset FILE.jsonl --save_path OUT
    deepspeed --num_gpus 8 scripts/train_dpo.py --config configs/critic_backend.json \
        --pretrain MODEL --dataset FILE.jsonl --save_path OUT

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.train_dpo import main  # noqa: E402

if __name__ == "__main__":
    main()
