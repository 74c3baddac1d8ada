#!/usr/bin/env python
"""Keep the frontend tasks whose reference page renders (offline headless browsers).

    python scripts/filter_websites.py data/frontend_tasks/test.jsonl \
        data/frontend_tasks/test_filtered.jsonl \
        --screenshot_dir data/frontend_tasks/reference_screenshots

``--help`` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweet_rl.cli.filter_websites import main  # noqa: E402

if __name__ == "__main__":
    main()
