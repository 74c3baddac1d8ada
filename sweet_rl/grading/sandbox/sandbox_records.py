"""The worker's side of a child's result socket: packets, records, deadlines.

Loaded by path by :mod:`sandbox_worker` (stdlib only). A child sends, on an AF_UNIX
SOCK_SEQPACKET socket, a ``begin`` packet and then one record per test (see
:mod:`sandbox_child`); every packet starts with the job's nonce. The worker reads them with
the kernel's receive timestamps (SO_TIMESTAMPNS), so how long each test took is measured by
the kernel, not told by the child. Packets without the nonce (written by the answer itself),
records for another test and anything after the last record are refused and counted.
"""

import json
import os
import select
import signal
import sys
import time

import _socket

from sandbox_child import MAX_PACKET, NONCE_LENGTH

# a job whose packets exceed this is treated as crashed: room for a few outputs of the
# largest size the wire format carries (sandbox_values.MAX_BYTES), escaped once more
MAX_REPLY_BYTES = 160 * 1024 * 1024
SETUP_LIMIT = 5.0  # seconds a child may take from its fork to its first test
GRACE = 0.5  # seconds on top of a test's own limit before its child is killed
# seconds a child may take, after its ``E`` packet (the answer's value is computed), to
# encode and start sending the record: a 14 MB record takes 1.2-1.7 s to encode here, which
# the test's own limit plus GRACE did not always cover. The kernel's timestamps still bound
# the whole test (kernel_tolerance), so a forged ``E`` only delays the kill
ENCODE_GRACE = 3.0
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35  # Linux; not exported by _socket


ENCODE_RATE = 4e6  # bytes of record per second the child is granted for encoding and sending


def kernel_tolerance(timeout, size=0):
    """How much longer than its limit the kernel may see a test take: scheduling, and the
    encoding and sending of a ``size``-byte record (bounded: records are at most 48 MiB)."""
    return 0.1 + 0.1 * timeout + size / ENCODE_RATE


class Child:
    """A confined child: its pid, the worker's end of its result socket and its job pipe."""

    def __init__(self, pid, sock, job_fd):
        self.pid, self.sock, self.job_fd = pid, sock, job_fd
        self.jobs, self.alive = 0, True
        self.parts, self.received = [], 0  # a record that came in several packets


def packets(child):
    """Every packet waiting on the child's socket: ``(data, kernel time)``; b"" at EOF."""
    while True:
        try:
            data, ancillary, _flags, _address = child.sock.recvmsg(
                MAX_PACKET + NONCE_LENGTH + 16, _socket.CMSG_SPACE(16), _socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        stamp = None
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(payload) >= 16:
                stamp = (int.from_bytes(payload[:8], sys.byteorder, signed=True)
                         + int.from_bytes(payload[8:16], sys.byteorder, signed=True) / 1e9)
        yield data, stamp
        if not data:
            return


def collect(child, task, index, results, status_of, give):
    """Read records until the job is done: ``(next index, child still usable, refused)``.

    ``give(i)`` sends test ``i``'s expression to the child: right after the begin packet for
    the first, right after each record for the next. Each test gets ``timeout + GRACE``
    seconds from then (``SETUP_LIMIT`` for the begin packet); an overrun or a dead child
    fails that test.
    """
    timeout, nonce = task["timeout"], task["nonce"].encode()
    deadline, last_stamp, refused = time.monotonic() + SETUP_LIMIT, None, 0
    begun = False  # the child sent its begin packet
    while index < len(results):
        wait = deadline - time.monotonic()
        ready = select.select([child.sock], [], [], wait)[0] if wait > 0 else []
        if not ready:
            if not begun:  # never started: compiling or confining took too long
                for late in range(index, len(results)):
                    results[late] = ["crash", f"no start within {SETUP_LIMIT} s"]
                return len(results), False, refused
            results[index] = ["timeout", f"over {timeout} s"]
            return index + 1, False, refused
        for data, stamp in packets(child):
            child.received += len(data)
            if not data:  # the child is gone
                child.alive = False
                if index == len(results):  # after its last record: it just exited
                    return index, True, refused
                results[index] = ["crash", describe(status_of(child))]
                return index + 1, False, refused
            if index == len(results):  # whatever follows the last record is not taken
                refused += 1
                continue
            if child.received > MAX_REPLY_BYTES:
                results[index] = ["crash", "output too large"]
                return index + 1, False, refused
            if not data.startswith(nonce) or len(data) <= NONCE_LENGTH:
                refused += 1  # written by the answer itself: never taken as a result
                continue
            kind, body = data[NONCE_LENGTH:NONCE_LENGTH + 1], data[NONCE_LENGTH + 1:]
            if kind == b"B" and not begun:
                begun, last_stamp = True, stamp
            elif kind == b"E" and begun:
                deadline = max(deadline, time.monotonic() + ENCODE_GRACE)
                continue
            elif kind == b"+" and begun:
                child.parts.append(body)
                deadline += len(body) / ENCODE_RATE  # a large record takes time to encode
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
                give(index)
            deadline = time.monotonic() + timeout + GRACE
    return index, True, refused


def parse_record(raw, index, timeout, stamp, last_stamp):
    """``[status, detail]`` of a record for test ``index``, or None if it is not one."""
    try:
        number, status, detail = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if number != index or status not in ("ok", "error", "timeout"):
        return None
    if stamp is not None and last_stamp is not None and \
            stamp - last_stamp > timeout + kernel_tolerance(timeout, len(raw)):
        return ["timeout", f"over {timeout} s (measured by the kernel)"]
    return [status, str(detail)]


def await_exit(child, seconds):
    end = time.monotonic() + seconds
    while child.alive and time.monotonic() < end:
        if select.select([child.sock], [], [], end - time.monotonic())[0]:
            for data, _stamp in packets(child):
                if not data:
                    child.alive = False


def describe(status):
    if status is None:
        return "exited"
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.WEXITSTATUS(status)}"
