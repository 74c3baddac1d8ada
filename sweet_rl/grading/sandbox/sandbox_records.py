"""The worker's side of a child's result socket: packets, records, deadlines.

Loaded by path by :mod:`sandbox_worker` (stdlib only). A child sends, on an AF_UNIX
SOCK_SEQPACKET socket, a ``begin`` packet and then one record per test (see
:mod:`sandbox_child`); every packet starts with the job's nonce. The worker reads them with
the kernel's receive timestamps (SO_TIMESTAMPNS), so how long each test took is measured by
the kernel, not told by the child. Packets without the nonce (written by the answer itself),
records for another test and anything after the last record are refused and counted.

Whether a child still runs is asked of its pidfd, never read from its socket: an empty
packet reads like the end of the stream, and a child can close its socket (or put
``/dev/null`` over it) and go on running. A socket hung up while its child runs can bring
no record any more: that child is killed and its test fails as a crash.
"""

import array
import fcntl
import json
import os
import select
import signal
import sys
import termios
import time

import _socket

from sandbox_child import MAX_PACKET, NONCE_LENGTH, result_line
from sandbox_limits import ENCODE_GRACE, EXIT_WAIT, GRACE, SETUP_LIMIT

# a job whose packets exceed this is treated as crashed: room for a few outputs of the
# largest size the wire format carries (sandbox_values.MAX_BYTES), escaped once more
MAX_REPLY_BYTES = 160 * 1024 * 1024
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35  # Linux; not exported by _socket
ENCODE_RATE = 4e6  # bytes of record per second the child is granted for encoding and sending
_HUNG_UP = select.POLLHUP | select.POLLRDHUP


def kernel_tolerance(timeout, size=0):
    """How much longer than its limit the kernel may see a test take: scheduling, and the
    encoding and sending of a ``size``-byte record, at most ``ENCODE_GRACE`` however large
    the record is."""
    return 0.1 + 0.1 * timeout + min(size / ENCODE_RATE, ENCODE_GRACE)


class Child:
    """A confined child: its pid (the fork server's), its pidfd, the worker's end of its
    result socket and of its job channel."""

    def __init__(self, pid, pidfd, sock, job_fd):
        self.pid, self.pidfd, self.sock, self.job_fd = pid, pidfd, sock, job_fd
        self.alive = True  # False once it is known to have ended
        self.parts = []  # a record that came in several packets

    def ended(self, seconds=0.0):
        """True once the process has ended (its pidfd turns readable), waiting up to
        ``seconds`` for it."""
        if self.alive and select.select([self.pidfd], [], [], max(0.0, seconds))[0]:
            self.alive = False
        return not self.alive

    def kill(self):
        """SIGKILL, through the pidfd: the same process in every pid namespace, and never
        another one (the pid stays unreaped until the worker is done with it)."""
        if self.alive:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:  # it has ended
                pass

    def close(self):
        self.sock.close()
        for fd in (self.pidfd, self.job_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
        self.pidfd = self.job_fd = None


def _hung_up(sock):
    """Whether the child's end of the socket is closed or shut down for writing and nothing
    is left to read (the socket says hung up while packets sent before are still queued)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | _HUNG_UP)
    if not any(events & _HUNG_UP for _fd, events in poller.poll(0)):
        return False
    queued = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, queued, True)
    return queued[0] == 0


def packets(child, most=256):
    """Up to ``most`` packets waiting on the child's socket (the caller checks its deadline
    between batches: a child may write without end): ``(data, kernel time)``; ``data`` is
    None, last, when the socket is hung up and empty (an empty packet is only an empty
    packet)."""
    for _ in range(most):
        try:
            data, ancillary, _flags, _address = child.sock.recvmsg(
                MAX_PACKET + NONCE_LENGTH + 16, _socket.CMSG_SPACE(16), _socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if not data and _hung_up(child.sock):
            yield None, None
            return
        stamp = None
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(payload) >= 16:
                stamp = (int.from_bytes(payload[:8], sys.byteorder, signed=True)
                         + int.from_bytes(payload[8:16], sys.byteorder, signed=True) / 1e9)
        yield data, stamp


def collect(child, task, index, results, status_of, give, received, setup_by=None):
    """Read records until the job is done: ``(next index, child still usable, refused)``.

    ``status_of(child, seconds)`` is the wait status of a child that ended (None when not
    known within ``seconds``). ``give(i, deadline)`` sends test ``i``'s expression to the
    child, giving up at ``deadline``: right after the begin packet for the first, right after
    each record for the next; it returns whether it sent one (nothing when the tests went
    ahead). Each test gets ``timeout + GRACE`` seconds from then, and ``ENCODE_GRACE`` more
    once (``SETUP_LIMIT`` for the begin packet); an overrun, a dead child or a socket hung up
    fails that test. ``received`` (``[bytes]``) counts the job's packets, across
    the children one job may need, against ``MAX_REPLY_BYTES``; ``setup_by`` is when the
    begin packet is due (default: ``SETUP_LIMIT`` from now).
    """
    timeout, nonce = task["timeout"], task["nonce"].encode()
    deadline = time.monotonic() + SETUP_LIMIT if setup_by is None else setup_by
    last_stamp, refused = None, 0
    begun = encoding = False  # the child sent its begin packet; its value for this test
    started = None  # when the current test's expression was given
    while index < len(results):
        wait = deadline - time.monotonic()
        ready = select.select([child.sock, child.pidfd], [], [], wait)[0] if wait > 0 else []
        if not ready:
            if not begun:  # never started: compiling or confining took too long
                for late in range(index, len(results)):
                    results[late] = ["crash", f"no start within {SETUP_LIMIT} s"]
                return len(results), False, refused
            results[index] = ["timeout", f"over {timeout} s"]
            return index + 1, False, refused
        hung_up = False
        for data, stamp in packets(child):
            if data is None:
                hung_up = True
                break
            received[0] += len(data)
            if index == len(results):  # whatever follows the last record is not taken
                refused += 1
                continue
            if received[0] > MAX_REPLY_BYTES:
                results[index] = ["crash", "output too large"]
                return index + 1, False, refused
            if not data.startswith(nonce) or len(data) <= NONCE_LENGTH:
                refused += 1  # written by the answer itself: never taken as a result
                continue
            kind, body = data[NONCE_LENGTH:NONCE_LENGTH + 1], data[NONCE_LENGTH + 1:]
            if kind == b"B" and not begun:
                begun, last_stamp = True, stamp
            elif kind == b"E" and begun and not encoding:
                # once per test, and only up to a fixed bound: a keep-alive moves nothing
                encoding = True
                deadline = started + timeout + GRACE + ENCODE_GRACE
                continue
            elif kind == b"+" and begun:
                child.parts.append(body)
                continue
            elif kind == b" " and begun:
                record = b"".join(child.parts) + body if child.parts else body
                child.parts = []
                status = parse_record(record, index, timeout, stamp, last_stamp)
                if status is None:
                    refused += 1
                    continue
                results[index] = status
                index += 1
                last_stamp = stamp
            else:
                refused += 1
                continue
            if index < len(results):
                encoding, started = False, time.monotonic()
                deadline = started + timeout + GRACE
                if give(index, deadline):
                    # the child can send nothing for this test before it has read it: the
                    # next select, not another read now, finds what it sends
                    break
        if child.pidfd in ready:
            # it ended; its files closed before its pidfd turned readable, so its socket is
            # hung up once what it sent before it ended is read (the next passes)
            child.alive = False
        if index < len(results) and hung_up:
            # no record can come any more: the child ended, or it still runs without a
            # socket to send one on (it is killed)
            by = time.monotonic() + EXIT_WAIT  # to see it end and learn how, together
            child.kill()
            child.ended(EXIT_WAIT)
            results[index] = ["crash", describe(status_of(child, by - time.monotonic()))]
            return index + 1, False, refused
    return index, True, refused


def parse_record(raw, index, timeout, stamp, last_stamp):
    """``[status, detail]`` of a record for test ``index``, or None if it is not one.

    Never raises: a record is the answer's to forge (nested a hundred thousand deep, of
    the wrong types), and nothing it sends may end the worker. The time it took is checked
    against the kernel's timestamps; the encoding allowance is granted only to a record in
    the exact form the harness writes, so padding a record (spaces, escapes) buys no time.
    """
    try:
        number, status, detail = json.loads(raw)
        if type(number) is not int or number != index or status not in ("ok", "error",
                                                                         "timeout"):
            return None
        detail = str(detail) if type(detail) is not str else detail
        took = None if stamp is None or last_stamp is None else stamp - last_stamp
        if took is not None and took > timeout + kernel_tolerance(timeout):
            size = len(raw) if raw == result_line(number, status, detail).encode() else 0
            if took > timeout + kernel_tolerance(timeout, size):
                return ["timeout", f"over {timeout} s (measured by the kernel)"]
        return [status, detail]
    except Exception:  # noqa: BLE001 - RecursionError, MemoryError, anything a forgery raises
        return None


def describe(status):
    """Words for a wait status (None: unknown); never raises (a real-time signal has no
    name in Python's enum)."""
    if status is None:
        return "exited"
    try:
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            try:
                return f"killed by {signal.Signals(number).name}"
            except ValueError:
                low, high = signal.SIGRTMIN, signal.SIGRTMAX
                return (f"killed by SIGRTMIN+{number - low}" if low <= number <= high
                        else f"killed by signal {number}")
        return f"exited with status {os.WEXITSTATUS(status)}"
    except Exception:  # noqa: BLE001
        return f"ended (wait status {status})"
