"""The `slow` marker's lists name files and tests that exist (a moved or renamed test must
stay marked)."""

import re

from tests.conftest import REPO_ROOT, SLOW_FILES, SLOW_TESTS


def test_every_slow_file_exists():
    missing = sorted(path for path in SLOW_FILES if not (REPO_ROOT / path).is_file())
    assert missing == []


def test_every_slow_test_exists():
    missing = []
    for test in SLOW_TESTS:
        path, name = test.split("::")
        source = (REPO_ROOT / path).read_text() if (REPO_ROOT / path).is_file() else ""
        if not re.search(rf"^def {name}\(", source, re.M):
            missing.append(test)
    assert sorted(missing) == []
