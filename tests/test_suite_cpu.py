"""benchmarks/suite_cpu.py: the CPU each test and its processes use, counted in the workers."""

import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import suite_cpu  # noqa: E402


def test_the_report_orders_tests_by_cpu_and_counts_their_children():
    records = [{"test": "a", "own": 0.5, "children": 0.0, "wall": 0.6},
               {"test": "b", "own": 0.1, "children": 2.0, "wall": 3.1}]
    report = suite_cpu.summarize(records, wall=2.0, top=1).splitlines()
    assert report[0].startswith("suite_cpu: 2 tests in 2.0 s wall; their CPU 2.6 s ")
    assert "1.30 cores on average" in report[0] and "summed over tests 1.1 s" in report[0]
    assert report[3:] == ["| 2.1 | 0.1 | 2.0 | 3.1 | b |"]


def test_a_run_on_two_workers_counts_a_child_s_cpu(tmp_path):
    (tmp_path / "test_two.py").write_text(textwrap.dedent("""
        import subprocess, sys

        def test_busy_child():  # about half a second of CPU in a child process
            subprocess.run([sys.executable, "-c",
                            "import time\\nt = time.process_time()\\n"
                            "while time.process_time() - t < 0.5: pass"], check=True)

        def test_idle():
            pass
        """))
    out = tmp_path / "records.jsonl"
    result = subprocess.run([sys.executable, "benchmarks/suite_cpu.py", "--top", "1", "--out",
                             str(out), "--", "-n", "2", "-p", "no:cacheprovider",
                             str(tmp_path / "test_two.py")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("suite_cpu: 2 tests in ") for line in lines), result.stdout
    busy = [line for line in lines if line.endswith("test_two.py::test_busy_child |")]
    assert len(busy) == 1 and float(busy[0].split("|")[3]) >= 0.4, busy  # the children column
    assert not any("test_idle" in line for line in lines)  # --top 1
    assert len(out.read_text().splitlines()) == 2
