"""Running a confinement layer in a fresh Python process, as the sandbox worker does.

Every layer that changes the process it runs in (seccomp, Landlock, rlimits, namespaces, uid)
is tested in a subprocess, never in the pytest process: each script loads the modules by
path (``python -S``, as the worker) and prints one JSON line of results.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from sweet_rl.grading.sandbox import sandbox_cleanup, sandbox_landlock

SANDBOX = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", "sweet_rl", "grading", "sandbox")
)
IS_ROOT = os.geteuid() == 0
HAS_LANDLOCK = sandbox_landlock.landlock_abi() > 0
NOBODY = 65534

needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs real root (mounts, uid switches)")
needs_landlock = pytest.mark.skipif(not HAS_LANDLOCK, reason="this kernel has no Landlock")

# the scripts' way of naming what an action did (needs ``errno`` imported)
OUTCOME_FUNCTION = '''
def outcome(action):
    """"ok", or the errno name of the OSError that ``action`` raised."""
    try:
        action()
        return "ok"
    except OSError as error:
        return errno.errorcode[error.errno]
'''

PRELUDE = f"""
import ctypes, errno, fcntl, json, mmap, os, resource, signal, socket, stat, sys
sys.path.insert(0, {SANDBOX!r})
import sandbox_confine as confine
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
{OUTCOME_FUNCTION}
def raw(number, *args):
    '''A raw system call: "ok" or the errno name.'''
    ctypes.set_errno(0)
    words = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(ctypes.c_long(number), *words) >= 0:
        return "ok"
    return errno.errorcode[ctypes.get_errno()]

def libc_call(result):
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

def become_user(uid):
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)

def report(value):
    print(json.dumps(value))
"""


def run_script(body, timeout=120):
    """Run ``body`` after PRELUDE in ``python -S`` (as the worker runs)."""
    return subprocess.run([sys.executable, "-S", "-c", PRELUDE + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=timeout)


def script_result(body, timeout=120):
    done = run_script(body, timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def shared_tmp():
    """A folder under /tmp that every uid can reach (pytest's own is 0700), removed after."""
    folder = tempfile.mkdtemp(prefix="confine_test_", dir="/tmp")
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        assert sandbox_cleanup.remove_tree(folder, keep_root=False) == 0

