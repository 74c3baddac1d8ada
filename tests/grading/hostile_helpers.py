"""The world hostile answers are graded in, and the checks that they hurt nothing in it.

``tests/fixtures/adversarial_answers.jsonl`` holds one attack per line. Its answers name
things outside the sandbox through placeholders, filled here by :class:`HostileWorld`:

- ``__CANARY__`` a file that must keep its content, mode, times and attributes;
- ``__OUTSIDE__`` a path outside the sandbox that must stay unwritten;
- ``__TASK_FILE__`` the fixture itself (it holds the references), ``__PROJECT__`` this checkout;
- ``__PORT__`` a TCP listener, ``__UNIX_DGRAM__``/``__UNIX_STREAM__`` pathname unix sockets
  (datagram, stream), all of which must receive nothing;
- ``__VICTIM_PID__`` a bystander process of the grader's own user, standing in for the
  grading process: it must keep running with its limits and scheduling untouched;
- ``__IPC_KEY__`` the first of 16 System V IPC keys of this run: none may exist afterwards.

Rows with a ``known_break`` field are attacks that still succeed (see that field); they are
left out unless asked for. Shared by test_adversarial.py and test_hostile_run.py.

Run as a script (``python hostile_helpers.py RULES FOLDER OUT``) it grades the whole batch in
a world under FOLDER as whoever runs it and writes :func:`grade_batch`'s summary to OUT: the
unprivileged half of test_adversarial.py runs it as another uid.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile

from tests.grading.confine_helpers import OUTCOME_FUNCTION

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURE = os.path.join(PROJECT, "tests", "fixtures", "adversarial_answers.jsonl")
SECRET = "s3cret-value"  # in the grader's environment: the ``environment`` answer must not see it
IPC_KEYS = 16  # keys __IPC_KEY__ .. __IPC_KEY__ + 15 belong to one run
# paths plant_files tries outside its job folder (shared by every process of the machine)
PLANTED_PATHS = ("/tmp/sweet_rl_planted_note", "/dev/shm/sweet_rl_planted_note")
_IPC_RMID = 0


# what an answer may do to the world, as outcome names (the errno's name, or "ok")
PROBE = "\nimport errno, os\n" + OUTCOME_FUNCTION + """
def probe(outside):
    def write(path):
        with open(path, "w") as handle:
            handle.write("x")
    return (outcome(os.fork), outcome(lambda: os.kill(os.getppid(), 0)),
            outcome(lambda: write(outside)), outcome(lambda: write("inside.txt")),
            sorted(os.listdir(".")))
"""


def load_rows(known_breaks: bool = False) -> list:
    """The fixture's rows, placeholders unfilled; known breaks only when asked for."""
    with open(FIXTURE) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [row for row in rows if known_breaks or "known_break" not in row]


def worker_processes(scratch_root) -> list:
    """PIDs of sandbox workers or their children started under ``scratch_root``, still alive
    (children are forks of their worker, so they share its command line)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read()
            except OSError:
                continue
            if b"sandbox_worker.py" in command and str(scratch_root).encode() in command:
                found.append(int(entry))
    return found


def _metadata(path: str) -> tuple:
    info = os.stat(path)
    try:
        attributes = sorted(os.listxattr(path))
    except OSError:
        attributes = []
    # not the access time: reading the canary (as the checks do) may move it
    return info.st_mode, info.st_mtime_ns, attributes


def _process_state(pid: int) -> dict:
    """What an answer could change about a bystander: limits, niceness, CPUs, policy."""
    with open(f"/proc/{pid}/limits") as handle:
        limits = handle.read()
    with open(f"/proc/{pid}/stat") as handle:
        state = handle.read().rsplit(")", 1)[1].split()[0]
    return {"limits": limits, "nice": os.getpriority(os.PRIO_PROCESS, pid),
            "cpus": sorted(os.sched_getaffinity(pid)), "policy": os.sched_getscheduler(pid),
            "running": state not in ("T", "t", "Z", "X")}


def ipc_objects(first_key: int, count: int = IPC_KEYS) -> list:
    """``(kind, id)`` of the System V IPC objects whose key is in ``first_key .. + count``."""
    found = []
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields and first_key <= int(fields[0]) < first_key + count:
                found.append((kind, int(fields[1])))
    return found


def remove_ipc_objects(objects: list) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, ident in objects:
        if kind == "shm":
            libc.shmctl(ident, _IPC_RMID, None)
        elif kind == "msg":
            libc.msgctl(ident, _IPC_RMID, None)
        else:
            libc.semctl(ident, 0, _IPC_RMID)


class HostileWorld:
    """Everything the placeholders name, set up in ``folder``; :meth:`problems` says what an
    answer changed. Use as a context manager (it ends the bystander and removes what it made)."""

    def __init__(self, folder):
        self.folder = str(folder)
        self.canary = os.path.join(self.folder, "canary.txt")
        with open(self.canary, "w") as handle:
            handle.write("still here")
        self.canary_was = _metadata(self.canary)
        self.outside = os.path.join(self.folder, "escaped.txt")
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        # unix socket paths must be short (108 bytes): a folder of their own under /tmp,
        # open to every uid, so that only the sandbox stands between an answer and them
        self.unix_folder = tempfile.mkdtemp(prefix="sweet_rl_unix_", dir="/tmp")
        os.chmod(self.unix_folder, 0o755)
        self.dgram_path = os.path.join(self.unix_folder, "dgram.sock")
        self.stream_path = os.path.join(self.unix_folder, "stream.sock")
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(self.dgram_path)
        self.dgram.setblocking(False)
        self.stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stream.bind(self.stream_path)
        self.stream.listen(8)
        self.stream.setblocking(False)
        for path in (self.dgram_path, self.stream_path):
            os.chmod(path, 0o777)
        sleeper = shutil.which("sleep")
        command = (
            [sleeper, "3600"]
            if sleeper
            else [sys.executable, "-c", "import time; time.sleep(3600)"]
        )
        self.victim = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        self.victim_was = _process_state(self.victim.pid)
        self.ipc_key = random.randrange(0x10000000, 0x7FFF0000) & ~0xFF
        self.fills = {"__CANARY__": self.canary, "__OUTSIDE__": self.outside,
                      "__TASK_FILE__": FIXTURE, "__PROJECT__": PROJECT,
                      "__PORT__": str(self.tcp.getsockname()[1]),
                      "__UNIX_DGRAM__": self.dgram_path, "__UNIX_STREAM__": self.stream_path,
                      "__VICTIM_PID__": str(self.victim.pid), "__IPC_KEY__": str(self.ipc_key)}

    def fill(self, row: dict) -> dict:
        """``row`` with every placeholder in its text fields replaced."""
        text = json.dumps(row)
        for key, value in self.fills.items():
            text = text.replace(key, value)
        return json.loads(text)

    def load(self, known_breaks: bool = False) -> list:
        return [self.fill(row) for row in load_rows(known_breaks)]

    def problems(self) -> list:
        """What answers changed outside the sandbox (empty: nothing)."""
        found = []
        try:
            with open(self.canary) as handle:
                if handle.read() != "still here":
                    found.append("the canary's content changed")
            if _metadata(self.canary) != self.canary_was:
                found.append(
                    f"the canary's metadata changed: {self.canary_was} -> {_metadata(self.canary)}"
                )
        except OSError as error:
            found.append(f"the canary is gone: {error}")
        if os.path.lexists(self.outside):
            found.append(f"{self.outside} was written")
        for name, server in (
            ("the TCP listener", self.tcp),
            ("the unix stream listener", self.stream),
        ):
            try:
                server.accept()[0].close()
                found.append(f"{name} got a connection")
            except BlockingIOError:
                pass
        try:
            self.dgram.recv(64)
            found.append("the unix datagram socket got a datagram")
        except BlockingIOError:
            pass
        if self.victim.poll() is not None:
            found.append(f"the bystander process ended ({self.victim.returncode})")
        else:
            now = _process_state(self.victim.pid)
            changed = [key for key in now if now[key] != self.victim_was[key]]
            if changed:
                found.append(f"the bystander process's {', '.join(changed)} changed: {now}")
        objects = ipc_objects(self.ipc_key)
        if objects:
            found.append(f"System V IPC objects outlived their answer: {objects}")
        try:
            with open("/proc/keys") as handle:
                if "sweet_rl_planted" in handle.read():
                    found.append("a key planted by an answer is in the kernel keyring")
        except OSError:
            pass
        found += [f"{path} was written" for path in PLANTED_PATHS if os.path.lexists(path)]
        return found

    def close(self) -> None:
        self.victim.kill()
        self.victim.wait()
        remove_ipc_objects(ipc_objects(self.ipc_key))
        for server in (self.tcp, self.dgram, self.stream):
            server.close()
        shutil.rmtree(self.unix_folder, ignore_errors=True)
        try:  # the canary's mode may have been changed by a known break
            os.chmod(self.canary, 0o644)
        except OSError:
            pass

    def __enter__(self) -> "HostileWorld":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- running the batch ------------------------------------------------------------------------
def make_scratch_root(parent=None) -> str:
    """A new folder for the workers' scratch folders that every uid may enter (0711). Not
    pytest's tmp_path: that lies under a 0700 folder of the calling user, which a worker on
    a uid of its own cannot enter (the grader then refuses to start: attack class 11 of
    docs/safety.md)."""
    path = tempfile.mkdtemp(prefix="sweet_rl_scratch_", dir=parent)
    os.chmod(path, 0o711)
    return path


def grade_batch(rules: str, folder: str, scratch_root: str, workers: int = 2) -> dict:
    """Grade every attack (known breaks left out) in one batch, timeout 1 s and 512 MiB as
    the fixture's expected scores assume, in a :class:`HostileWorld` under ``folder``. A
    summary that JSON carries: per row its reward, verdicts, refused packets and blocked
    word; what the attacks changed outside; worker processes and scratch entries left."""
    from sweet_rl.grading.grader import Grader

    with HostileWorld(folder) as world:
        rows = world.load()
        grader = Grader(
            rules, timeout=1.0, memory_mb=512, workers=workers, scratch_root=scratch_root
        )
        graded = grader.grade(
            [(row["answer"], row["ground_truth"], row["test_cases"]) for row in rows]
        )
        return {"isolation": grader.isolation,
                "expected": {row["name"]: row["expected"][rules] for row in rows},
                "verdicts": {row["name"]: row["verdicts"] for row in rows if "verdicts" in row},
                "refused": {row["name"]: row["refused"] for row in rows if "refused" in row},
                "results": {row["name"]: {"reward": result.reward, "tests": result.tests,
                                          "refused": result.refused,
                                          "blocked_word": result.blocked_word,
                                          "test_results": result.test_results}
                            for row, result in zip(rows, graded)},
                "problems": world.problems(),
                "workers_left": worker_processes(scratch_root),
                "scratch_left": sorted(os.listdir(scratch_root))}


if __name__ == "__main__":
    rules, folder, out = sys.argv[1:4]
    summary = grade_batch(rules, folder, make_scratch_root(folder))
    with open(out, "w") as handle:
        json.dump(summary, handle)
