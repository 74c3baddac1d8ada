"""The `slow` marker's file list names files that exist (a moved test must stay marked)."""

from tests.conftest import REPO_ROOT, SLOW_FILES


def test_every_slow_file_exists():
    missing = sorted(path for path in SLOW_FILES if not (REPO_ROOT / path).is_file())
    assert missing == []
