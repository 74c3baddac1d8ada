"""Fork servers holding heavy packages: a job that imports numpy (or pandas, bs4...) gets its
child from a server that imported it already, confined and as fresh as any other child; a
server that cannot be made or dies leaves the job to the fork server itself."""

import os
import signal
import sys
import time

import pytest

from sweet_rl.grading.decode import decode
from sweet_rl.grading.sandbox.client import SandboxWorker
from tests.grading.hostile_helpers import PROBE, PROJECT, worker_processes

sys.path.insert(0, os.path.join(PROJECT, "sweet_rl", "grading", "sandbox"))
import sandbox_preload as preload  # noqa: E402

numpy = pytest.importorskip("numpy")

# whether numpy was imported before the job's own import statement ran
SEEN_BEFORE = "import sys\nhad = 'numpy' in sys.modules\nimport numpy as np\n"
NOT_NAMED = "import sys\nhad = 'numpy' in sys.modules\n"


def test_the_import_statements_of_a_job_name_its_packages():
    code = ("import numpy as np, os\nfrom bs4 import BeautifulSoup\nimport scipy.optimize\n"
            "def f():\n    import pandas\n    from . import numpy\n    return 1\n"
            "# import sympy\ntext = 'import networkx'\nimport numpyish\n")
    assert preload.preloadable_imports(code) == ("bs4", "numpy", "pandas", "scipy")
    assert preload.preloadable_imports("import os, re\nfrom math import pi\n") == ()
    assert preload.preloadable_imports("import numpy", allowed={"pandas"}) == ()


class _Server:
    def __init__(self, names):
        self.names, self.closed = names, False

    def close(self):
        self.closed = True


class _Zygote:
    def __init__(self, fails=()):
        self.fails, self.started = set(fails), []

    def start_server(self, names, deadline):
        self.started.append(names)
        return None if names in self.fails else _Server(names)


def test_servers_are_kept_by_last_use_and_a_failed_one_is_not_tried_again():
    zygote = _Zygote(fails={("scipy",)})
    servers = preload.PreloadServers(zygote, limit=2)
    first = servers.server_for(("numpy",), 0)
    assert servers.server_for(("numpy",), 0) is first
    second = servers.server_for(("bs4",), 0)
    assert servers.server_for(("numpy",), 0) is first  # numpy is now the last used
    third = servers.server_for(("pandas",), 0)  # the least recently used (bs4) goes
    assert second.closed and not first.closed and not third.closed
    assert servers.server_for(("scipy",), 0) is None and servers.server_for(("scipy",), 0) is None
    assert zygote.started.count(("scipy",)) == 1 and servers.server_for((), 0) is None
    servers.drop(first)  # stopped answering: closed and not made again
    assert first.closed and servers.server_for(("numpy",), 0) is None
    servers.close()
    assert third.closed


@pytest.mark.parametrize("rules", ["benchmark", "strict"])
def test_a_job_that_imports_a_heavy_package_finds_it_imported(tmp_path, rules):
    with SandboxWorker(0, str(tmp_path)) as worker:
        seen = [worker.run(SEEN_BEFORE, ["had", "int(np.arange(5).sum())"], rules, 2.0, 1024),
                worker.run(NOT_NAMED, ["had"], rules, 2.0, 1024),
                worker.run(SEEN_BEFORE, ["had"], rules, 2.0, 1024)]
    assert [[decode(value) for _status, value in results] for results in seen] == \
        [[True, 10], [False], [True]]


# the worker tests' probe, in a job that imports numpy (so its child comes from its server)
PACKAGE_PROBE = "import numpy\n" + PROBE


def test_a_package_servers_children_are_confined_and_start_fresh(tmp_path):
    outside = str(tmp_path / "outside.txt")
    with SandboxWorker(0, str(tmp_path)) as worker:
        changed = worker.run("import numpy\nnumpy.pi = 3.0\nopen('left.txt', 'w').close()\n",
                             ["numpy.pi"], "strict", 2.0, 1024)
        probed = worker.run(PACKAGE_PROBE, [f"probe({outside!r}) + (numpy.pi,)"], "strict",
                            2.0, 1024)
    assert decode(changed[0][1]) == 3.0
    assert decode(probed[0][1]) == ("EPERM", "EPERM", "EACCES", "ok", ["inside.txt"],
                                    3.141592653589793)
    assert not os.path.exists(outside)


def _holding_numpy(pids):
    """The processes among ``pids`` that have numpy's extension mapped."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as handle:
                if "_multiarray_umath" in handle.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def _parent(pid):
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def test_a_package_server_that_dies_leaves_the_job_to_the_fork_server(tmp_path):
    scratch = str(tmp_path)
    with SandboxWorker(0, scratch) as worker:
        assert decode(worker.run(SEEN_BEFORE, ["had"], "strict", 2.0, 1024)[0][1]) is True
        holding = _holding_numpy(worker_processes(scratch))
        # the server, not the job's child (killed after its last record, perhaps still ending)
        servers = [pid for pid in holding if _parent(pid) not in holding]
        assert len(servers) == 1
        os.kill(servers[0], signal.SIGKILL)
        # the next numpy job cannot be forked there: its child imports numpy itself
        assert worker.run(SEEN_BEFORE, ["had", "int(np.ones(3).sum())"], "strict", 2.0,
                          1024) == [["ok", "false"], ["ok", "3"]]
        assert decode(worker.run(SEEN_BEFORE, ["had"], "strict", 2.0, 1024)[0][1]) is False
    assert worker_processes(scratch) == []


def test_no_package_server_outlives_its_worker(tmp_path):
    scratch = str(tmp_path)
    with SandboxWorker(0, scratch) as worker:
        for code in (SEEN_BEFORE, "from bs4 import BeautifulSoup\n", "import scipy\n"):
            worker.run(code, ["1"], "strict", 2.0, 1024)
        assert _holding_numpy(worker_processes(scratch))
    assert worker_processes(scratch) == []


def test_a_fork_server_that_does_not_answer_fails_the_request_for_a_package_server():
    # a late reply would answer the next request: the worker must be replaced, not go on
    import sandbox_zygote as zygote

    devnull = os.open(os.devnull, os.O_RDWR)
    high = zygote.fcntl.fcntl(devnull, zygote.fcntl.F_DUPFD, zygote.HIGH_FD)
    os.close(devnull)
    client = zygote.start_zygote(lambda parent: os._exit(0), [high], lambda pid: None)
    try:
        assert client.ready() == 0  # no confine(): nothing to report
        server = client.start_server(("numpy",), time.monotonic() + 5)
        assert server is not None and server.fork([high])[0] > 0
        server.close()
        os.kill(client.pid, signal.SIGSTOP)  # alive, never answering
        with pytest.raises(OSError):
            client.start_server(("bs4",), time.monotonic() + 5)
    finally:
        os.kill(client.pid, signal.SIGCONT)
        client.close()
        os.close(high)
