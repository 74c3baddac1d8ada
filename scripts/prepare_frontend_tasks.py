#!/usr/bin/env python
"""Build the frontend train/test task files from WebSight v0.2 (streamed with ``datasets``).

    python scripts/prepare_frontend_tasks.py data/frontend_tasks
    python scripts/prepare_frontend_tasks.py out --data_files websight.parquet \
        --train_end 10 --test_start 10 --test_end 20

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.prepare_frontend_tasks import main  # noqa: E402

if __name__ == "__main__":
    main()
