"""Stage commands started from one process that has already imported torch and transformers.

Every ``python -m sweet_rl.cli.main <stage>`` of a recipe spends about 5 CPU-seconds importing
torch and transformers before its first useful line, and a miniature run has dozens of stages.
A :class:`ForkServer` imports them once, in a process of the recipe's own interpreter and
environment, then forks one copy per stage command:

* the server does no tensor work, so no OpenMP or intra-op thread pool exists when it forks
  (a pool would not survive the fork); each stage creates its own, with the threads that
  ``OMP_NUM_THREADS`` of the environment sets, as a fresh interpreter would;
* each request carries the command's module and arguments, the working directory and the
  step log's file descriptor (passed over a Unix socket), so the stage writes to the very
  open file a subprocess would have inherited;
* the server forks a waiter, the waiter forks the stage and reports its exit status (a
  signal as its negative number, as :mod:`subprocess` does); the stage runs its module as
  ``__main__`` through :func:`runpy.run_module` at the top of the interpreter, so its
  exceptions, ``sys.exit`` codes and exit handlers behave as under ``python -m``;
* the server ends when the recipe's end of the socket closes, the recipe's exit included.

Only ``-m MODULE ...`` commands on Linux go through it (``fork`` without ``exec`` is not safe
on macOS); everything else runs as a subprocess. The numbers do not depend on it: every stage
seeds its own generators and reads only the files it names.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Dict, Optional, Sequence, Tuple

# what the miniature's torch stages import before their first line of work: modules, and
# names of transformers' lazy top level (each one loads its submodule); the Trainer alone is
# about 7 CPU-seconds on a 2-core Xeon
PRELOAD = ("torch",)
PRELOAD_TRANSFORMERS = ("AutoTokenizer", "PreTrainedTokenizerFast", "AutoModelForCausalLM",
                        "LlamaForCausalLM", "GenerationConfig", "DynamicCache", "Trainer",
                        "TrainingArguments")
_STATUS = struct.Struct("!i")
# the server's command line (an internal entry point, not a command of its own)
SERVE = f"import sys; from {__name__} import main; main(sys.argv[1:])"


def supported() -> bool:
    return sys.platform.startswith("linux")


class ForkServer:
    """One preloaded server per (interpreter, environment); :meth:`run` is thread-safe.
    ``preload=False`` imports nothing beforehand (the serving itself is the same)."""

    def __init__(self, python: str, env: Dict[str, str], preload: bool = True) -> None:
        self.requests, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lock = threading.Lock()
        with theirs:
            self.process = subprocess.Popen(
                [python, "-c", SERVE, str(theirs.fileno())] + ([] if preload else ["bare"]),
                env=env,
                stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),))

    def run(self, args: Sequence[str], log: Optional[int] = None) -> int:
        """The exit status of ``python -m MODULE ARGS`` (``args`` = ``["-m", MODULE, ...]``),
        its output on the file descriptor ``log`` (default: the recipe's own)."""
        if len(args) < 2 or args[0] != "-m":
            raise ValueError(f"only -m MODULE commands are forked, got {list(args[:2])}")
        ours, theirs = socket.socketpair()
        with ours, theirs:
            fds = [theirs.fileno()] + ([log] if log is not None else [])
            message = json.dumps({"args": list(args[1:]), "cwd": os.getcwd()}).encode()
            with self.lock:
                socket.send_fds(self.requests, [message], fds)
            theirs.close()
            reply = _read_exactly(ours, _STATUS.size)
        if reply is None:
            raise RuntimeError("the fork server's waiter died before reporting an exit status "
                               f"(server exit status: {self.process.poll()})")
        return _STATUS.unpack(reply)[0]

    def close(self, wait: bool = True) -> None:
        """Ends the server once it has taken the requests already sent; stages still running
        finish and report as usual."""
        self.requests.close()
        if wait:
            self.process.wait()


_servers: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], ForkServer] = {}
_servers_lock = threading.Lock()


@atexit.register
def _close_servers() -> None:
    """At the recipe's exit: each server ends once its stages have, and is waited for."""
    with _servers_lock:
        for key in list(_servers):
            _servers.pop(key).close()


def server_for(python: str, env: Dict[str, str]) -> ForkServer:
    """The server for this interpreter and environment, started on first use. A recipe uses
    one; a process that asks for another (a test running several recipes) closes the others,
    since each holds its preloaded modules in memory."""
    key = (python, tuple(sorted(env.items())))
    with _servers_lock:
        if key not in _servers or _servers[key].process.poll() is not None:
            for other in list(_servers):
                _servers.pop(other).close(wait=False)
            _servers[key] = ForkServer(python, env)
        return _servers[key]


def _read_exactly(sock: socket.socket, size: int) -> Optional[bytes]:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _reap(block: bool) -> None:
    """Wait for the waiters that have ended (every one with ``block``). Waiting, rather than
    letting the kernel discard them, adds each stage's CPU time to the server's children and
    so to the recipe's, as a subprocess's would be."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _serve(requests: socket.socket) -> Optional[dict]:
    """The server's loop. Returns only in a forked stage, with its request."""
    # Ctrl-C reaches the whole process group: the stages stop on it, the server ends when the
    # recipe does (its socket closes), and the waiters report how the stages ended
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        _reap(block=False)
        message, fds, _, _ = socket.recv_fds(requests, 1 << 20, 2)
        if not message:  # the recipe closed its end: the server ends after its stages
            _reap(block=True)
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork():  # the server: on to the next request
            for fd in fds:
                os.close(fd)
            continue
        requests.close()
        reply = socket.socket(fileno=fds[0])
        stage = os.fork()
        if stage == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            reply.close()
            request = json.loads(message)
            if len(fds) > 1:  # the step's log: the stage's stdout and stderr
                os.dup2(fds[1], 1)
                os.dup2(fds[1], 2)
                os.close(fds[1])
            if request["cwd"]:
                os.chdir(request["cwd"])
            return request
        _, status = os.waitpid(stage, 0)
        try:
            reply.sendall(_STATUS.pack(os.waitstatus_to_exitcode(status)))
        finally:
            os._exit(0)


def _exit_status(code: object) -> int:
    """The exit status of ``sys.exit(code)``, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run_stage(request: dict) -> None:
    """Run the request's module as ``__main__``, then end as the interpreter would, without
    tearing the preloaded modules down (about 2 s of a stage's wall time on a 2-core Xeon, for
    nothing: the process ends): threads joined, exit handlers run, streams flushed."""
    import runpy

    module, args = request["args"][0], request["args"][1:]
    sys.argv = [module] + args
    status = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        status = _exit_status(stop.code)
    except KeyboardInterrupt:  # the interpreter ends by the signal itself
        sys.excepthook(*sys.exc_info())
        status = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - reported as the interpreter would
        sys.excepthook(*sys.exc_info())
        status = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at exit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if status < 0:
            signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
        os._exit(status)


def main(argv: Sequence[str]) -> None:
    import importlib

    requests = socket.socket(fileno=int(argv[0]))
    if argv[1:] != ["bare"]:
        for name in PRELOAD:
            importlib.import_module(name)
        transformers = importlib.import_module("transformers")
        for name in PRELOAD_TRANSFORMERS:
            getattr(transformers, name)
    request = _serve(requests)
    if request is not None:
        run_stage(request)
