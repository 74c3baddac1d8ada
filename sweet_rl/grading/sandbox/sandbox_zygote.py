"""The fork server ("zygote") that every sandboxed child is forked from.

Loaded by path by :mod:`sandbox_worker` (stdlib only). The worker forks the zygote once,
after it has confined and warmed itself up and *before it reads any job*, so the zygote's
memory never holds a job: no answer's code, no test, no output. A child forked from it can
therefore find nothing of any other job in the memory it inherits (an answer scanning its
heap for an earlier answer's function, or for an earlier rollout's outputs, finds nothing),
and it receives its own job only after the fork, through its job channel (see
:mod:`sandbox_child`).

Protocol, over an AF_UNIX SOCK_SEQPACKET pair (one message each way per request):

    worker -> zygote   b"F" [+ pids to reap, comma-separated], with SCM_RIGHTS the child's
                       channels (the child finds them at 3, 4, ...: ``FIRST_CHILD_FD``)
    zygote -> worker   b"P" + pid, with SCM_RIGHTS [pidfd]   (the child runs; the zygote
                       closed the fds it got)
    worker -> zygote   b"R" + pid                  (only when the worker wants a wait status)
    zygote -> worker   b"S" + wait status, or b"S-" when unknown (the child still runs)
    worker -> zygote   b"Z" + module names, comma-separated, with SCM_RIGHTS [a control
                       socket]: fork a server that imports them (see :mod:`sandbox_preload`)
    zygote -> worker   b"P" + pid, with SCM_RIGHTS [pidfd]; the new server says b"R0" on its
                       control socket once its imports are done, then serves this protocol

The zygote reaps a child only when told to, so a pid the worker may still name is never
recycled, and it never blocks on one: a child told of that has not ended yet is reaped at a
later request. The worker hands over the children it is done with in its next fork request
(no extra round trip) and asks for a status only to describe a crash. The pid is the zygote's
own (the zygote may run in a pid namespace of its own, see :mod:`sandbox_worker`); the worker
watches and signals each child through its pidfd, which means the same process in every
namespace. Every reply the worker waits for has a deadline (``CONTROL_LIMIT``): a zygote that
does not answer makes the worker unusable, and the grader replaces it.
"""

import array
import fcntl
import gc
import os
import signal
import time

import _socket

from sandbox_limits import CONTROL_LIMIT

CONTROL_FDS = 2  # the descriptors a child gets (its result socket and job channel)
# they land on 3, 4 in the zygote as they arrive (its own descriptors sit at ``HIGH_FD`` and
# above), so a child inherits them where it uses them and moves none
FIRST_CHILD_FD = 3
HIGH_FD = 64
_FD_SPACE = _socket.CMSG_SPACE(CONTROL_FDS * array.array("i").itemsize)


def send_fds(sock, data, fds):
    sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])


def receive_fds(sock, size=4096):
    """``(data, fds)`` of one message; ``(b"", [])`` when the other side is gone."""
    data, ancillary, _flags, _address = sock.recvmsg(size, _FD_SPACE)
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


class ZygoteClient:
    """The worker's handle on its zygote."""

    def __init__(self, pid, sock, pidfd=None, parent=None):
        self.pid, self.sock = pid, sock
        sock.settimeout(CONTROL_LIMIT)  # every reply has a deadline: socket.timeout, an OSError
        self.finished = []  # children the worker is done with, reaped at the next request
        # a server forked by the zygote (start_server) is not the worker's child: it is
        # signalled through its pidfd and reaped by its parent
        self.pidfd, self.parent = pidfd, parent

    def ready(self, seconds=CONTROL_LIMIT):
        """Wait for a new zygote's ready message: the number its ``confine()`` returned (0
        for None). Raises OSError when it does not come within ``seconds``."""
        self.sock.settimeout(seconds)
        try:
            reply = self.sock.recv(64)
        finally:
            self.sock.settimeout(CONTROL_LIMIT)
        if not reply.startswith(b"R") or not reply[1:].isdigit():
            raise OSError(f"the zygote did not start ({reply!r})")
        return int(reply[1:])

    def start_server(self, names, deadline):
        """A fork server, forked from this one, that imported the modules ``names`` (a tuple
        of str): a ZygoteClient, or None when it was not ready by ``deadline`` (monotonic
        seconds; it is then killed). Raises OSError, as :meth:`fork` does, when this one did
        not fork it in time (a late reply would answer the next request)."""
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            pid, pidfd = self._request(b"Z" + ",".join(names).encode(), [theirs.fileno()])
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        server = ZygoteClient(pid, ours, pidfd, self)
        try:
            server.ready(max(0.001, deadline - time.monotonic()))
        except OSError:
            server.close()
            return None
        return server

    def fork(self, fds):
        """Ask for a child that finds ``fds`` (at most ``CONTROL_FDS``) at
        ``FIRST_CHILD_FD``, ``FIRST_CHILD_FD + 1``...: ``(pid, pidfd)``. The caller still owns
        (and closes) its fds and owns the pidfd. Raises OSError when the zygote does not fork
        one in time."""
        message = b"F" + b",".join(b"%d" % pid for pid in self.finished)
        self.finished = []
        return self._request(message, fds)

    def _request(self, message, fds):
        send_fds(self.sock, message, fds)
        reply, fds = receive_fds(self.sock, 64)
        if not reply.startswith(b"P") or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise OSError(f"the zygote did not fork a child ({reply!r})")
        return int(reply[1:]), fds[0]

    def done_with(self, pid):
        """The worker will not signal ``pid`` again: reap it with the next request."""
        self.finished.append(pid)

    def reap(self, pid, seconds=CONTROL_LIMIT):
        """The wait status of a child that ended (None if unknown: it still runs, or the
        zygote did not answer within ``seconds``); frees its pid when it ended."""
        try:
            self.sock.settimeout(min(seconds, CONTROL_LIMIT))
            self.sock.send(b"R%d" % pid)
            reply = self.sock.recv(64)
        except OSError:
            return None
        finally:
            self.sock.settimeout(CONTROL_LIMIT)
        return int(reply[1:]) if reply.startswith(b"S") and reply[1:] != b"-" else None

    def close(self):
        if self.parent is not None:  # a server the zygote forked
            for pid in self.finished:  # its own ended children: not left to the zygote
                self.reap(pid, 0.1)
            self.finished = []
            self.sock.close()
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass
            os.close(self.pidfd)
            self.parent.done_with(self.pid)
            return
        self.sock.close()
        try:
            os.kill(self.pid, 9)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def start_zygote(child_entry, keep_fds, die_with_parent, confine=None, own_pids=False):
    """Fork the zygote; returns a :class:`ZygoteClient`. ``child_entry(zygote_pid)`` runs in
    each child, with the descriptors its fork request sent at ``FIRST_CHILD_FD``..., and never
    returns; ``keep_fds`` are the worker's fds the zygote needs (/dev/null first), all at
    ``HIGH_FD`` or above; every other one is closed. ``confine()`` runs in the zygote before
    it serves: what it applies, every child inherits without paying for it again; the number
    it returns is the zygote's ready message (see :meth:`ZygoteClient.ready`, which the caller
    must read before its first request).
    ``own_pids``: the worker unshared its pid namespace, so the zygote is the first process
    of a new one (its parent, outside, shows as pid 0)."""
    if min(keep_fds) < HIGH_FD:
        raise ValueError(f"the zygote keeps descriptors at {HIGH_FD} and above, got {keep_fds}")
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    worker_pid = os.getpid()
    pid = os.fork()
    if pid:
        theirs.close()
        return ZygoteClient(pid, ours)
    try:
        ours.close()
        _SERVERS_DIE_WITH_PARENT.append(None if own_pids else die_with_parent)
        die_with_parent(0 if own_pids else worker_pid)
        control = _socket.socket(fileno=above(theirs.detach()))
        keep = sorted({control.fileno(), *keep_fds})
        devnull = keep_fds[0]
        for fd in (0, 1, 2):  # the worker's pipes to the grader are not the zygote's business
            os.dup2(devnull, fd)
        low = 3
        for fd in keep:
            if fd >= low:
                os.closerange(low, fd)
                low = fd + 1
        os.closerange(low, 1 << 16)
        note = confine() if confine is not None else None
        control.send(b"R%d" % (note or 0))  # ready: read by ZygoteClient.ready
        _serve(control, child_entry)
    finally:
        os._exit(0)


def _reap(pid):
    """``(ended, wait status)`` of a child, never blocking: ``(False, None)`` while it runs,
    ``(True, None)`` when it is no child of ours (any more)."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True, None
    return (True, status) if done else (False, None)


def _running(pid):
    """Whether a child the worker is done with still runs (never blocks)."""
    return not _reap(pid)[0]


# where n received descriptors belong, built once (see _serve)
_WANTED = [list(range(FIRST_CHILD_FD, FIRST_CHILD_FD + n)) for n in range(CONTROL_FDS + 1)]


def above(fd, floor=HIGH_FD):
    """``fd`` moved to the lowest free number at or above ``floor`` (the old one closed):
    out of the way of a child's descriptors, which go to ``FIRST_CHILD_FD``..."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, floor)
    os.close(fd)
    return moved


def _placed(fds):
    """The received descriptors at ``FIRST_CHILD_FD``... They land there as they arrive (the
    zygote holds nothing else below ``HIGH_FD``); anything else is moved into place."""
    wanted = _WANTED[len(fds)]
    if fds != wanted:
        moved = [above(fd) for fd in fds]
        for fd, target in zip(moved, wanted):
            os.dup2(fd, target)
            os.close(fd)
    return wanted


def _fork_and_report(sock, fds, run, *arguments):
    """Fork a process that finds ``fds`` at ``FIRST_CHILD_FD``... and runs ``run(*arguments)``
    (never returning); tell the worker its pid and pidfd (``b"P"``)."""
    fds = _placed(fds)
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()
            run(*arguments)
        finally:
            os._exit(0)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    try:
        send_fds(sock, b"P%d" % pid, [pidfd])
    finally:
        os.close(pidfd)


def serve_once(child_entry, fds):
    """Serve one fork request for ``fds`` with the calling process as the fork server: the
    zygote's own loop, run here (the worker forks its probes this way, so that what they
    measure is what a fork writes on both sides; see sandbox_pinning). As in the zygote,
    ``FIRST_CHILD_FD``... must be free. Returns ``(pid, pidfd)``; raises OSError."""
    ours, theirs = (_socket.socket(fileno=above(end.detach()))
                    for end in _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET))
    try:
        for fd in _WANTED[len(fds)]:
            try:
                os.fstat(fd)
            except OSError:
                continue
            raise OSError(f"descriptor {fd} is in use: a child's descriptors would replace it")
        send_fds(ours, b"F", fds)
        ours.shutdown(_socket.SHUT_WR)  # the loop ends after this one request
        _serve(theirs, child_entry)
        reply, got = receive_fds(ours, 64)
    finally:
        ours.close()
        theirs.close()
    if not reply.startswith(b"P") or len(got) != 1:
        for fd in got:
            os.close(fd)
        raise OSError(f"no child was forked ({reply!r})")
    return int(reply[1:]), got[0]


def _serve(sock, child_entry):
    """The fork server's loop. Every fork shares the zygote's pages with the new child
    again, so each page this loop writes afterwards is copied: it allocates and touches as
    little as it can (no comprehensions, which make a function object each time)."""
    unreaped = []  # children the worker is done with that had not ended yet
    own_pid = os.getpid()  # a child's parent, as the child sees it
    while True:
        try:
            data, fds = receive_fds(sock)
        except OSError:
            return
        if not data:  # the worker is gone
            return
        if data[:1] == b"F" and fds:
            if len(data) > 1:
                unreaped += map(int, data[1:].split(b","))
            if unreaped:
                unreaped = list(filter(_running, unreaped))
            _fork_and_report(sock, fds, child_entry, own_pid)
        elif data[:1] == b"R":
            status = _reap(int(data[1:]))[1]
            sock.send(b"S-" if status is None else b"S%d" % status)
        elif data[:1] == b"Z" and len(fds) == 1:
            _fork_and_report(sock, fds, _serve_preloaded, data[1:].decode().split(","),
                             child_entry)
        else:
            for fd in fds:
                os.close(fd)
            sock.send(b"?")


# how a server forked by the zygote dies with it: set in the zygote (None: the zygote is the
# first process of a pid namespace, and every process in it dies with it anyway)
_SERVERS_DIE_WITH_PARENT = []


def _serve_preloaded(names, child_entry):
    """A fork server's child that imports ``names`` and then serves fork requests on the
    control socket it was given (at ``FIRST_CHILD_FD``). A name that fails to import is
    left to the children (each fails on it as it would have)."""
    die_with_parent = _SERVERS_DIE_WITH_PARENT[0] if _SERVERS_DIE_WITH_PARENT else None
    if die_with_parent is not None:
        die_with_parent(os.getppid())
    # right above the children's descriptors: ``HIGH_FD`` is past the zygote's descriptor
    # limit, and the descriptors a fork request brings must still land at 3, 4
    control = _socket.socket(fileno=above(FIRST_CHILD_FD, FIRST_CHILD_FD + CONTROL_FDS))
    for name in names:
        try:
            __import__(name)
        except BaseException:  # noqa: BLE001 - any failure: the children import it themselves
            pass
    gc.collect()
    gc.freeze()  # as in the worker: the children's collections leave the imports alone
    control.send(b"R0")  # ready (see ZygoteClient.ready)
    _serve(control, child_entry)
