"""Slow tests are marked where they are defined, and the rule that keeps them so holds: a test
that uses a slow fixture (real Chromium, DeepSpeed's launcher, a real server) without the
`slow` mark stops the collection, naming the test."""

import ast
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT, SLOW_FIXTURES, unmarked_slow


def test_no_collected_test_uses_a_slow_fixture_unmarked(request):
    assert unmarked_slow(request.session.items) == []


def test_an_unmarked_user_of_a_slow_fixture_stops_the_collection(tmp_path):
    fixture = sorted(SLOW_FIXTURES)[0]
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n\n\n"
        f"@pytest.fixture\ndef {fixture}():\n    return 'started'\n")
    (tmp_path / "test_uses.py").write_text(
        "import pytest\n\n\n"
        f"def test_forgot_the_mark({fixture}):\n    pass\n\n\n"
        f"@pytest.mark.slow\ndef test_marked({fixture}):\n    pass\n\n\n"
        "def test_plain():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    said = run.stdout + run.stderr
    assert run.returncode == 4, said  # a usage error: nothing ran
    assert "test_uses.py::test_forgot_the_mark" in said
    # the marked user and the plain test are not named
    assert "test_marked" not in said and "test_plain" not in said


def _module_marks(path):
    """The marks named in a test file's module-level ``pytestmark``."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(target, "id", "") == "pytestmark" for target in node.targets):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)}
    return set()


def test_every_vllm_test_file_carries_the_vllm_and_slow_marks():
    files = sorted((REPO_ROOT / "tests" / "vllm").glob("test_*.py"))
    assert files
    unmarked = [f.name for f in files if not {"vllm", "slow"} <= _module_marks(f)]
    assert unmarked == []


class _Item:
    """A collected test as longest_first reads it: its name and its `slow` mark, if any."""

    def __init__(self, name, about=None, slow=False):
        self.name = name
        self.mark = None
        if about is not None or slow:
            import pytest

            self.mark = pytest.mark.slow(about=about).mark if about else pytest.mark.slow.mark

    def get_closest_marker(self, name):
        return self.mark if name == "slow" else None


def test_the_longest_tests_start_first_each_beside_a_quick_partner():
    from tests.conftest import longest_first

    items = [_Item("a"), _Item("b", slow=True), _Item("c", about=30), _Item("d"),
             _Item("e", about=900), _Item("f", about=200)]
    # a worker takes two tests at the start: the longest one's second is the first quick one
    assert [i.name for i in longest_first(items)] == ["e", "a", "f", "c", "b", "d"]
    assert [i.name for i in longest_first(items[:2])] == ["a", "b"]  # nothing timed: as given
    assert [i.name for i in longest_first([items[4], items[5]])] == ["e", "f"]

