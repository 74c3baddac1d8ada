"""The suite's clean-up of DeepSpeed's shared-memory buffers (tests/shm_cleanup.py): only the
buffers made since the session started, and none that a live process maps."""

import mmap
import os

from tests.shm_cleanup import mapped_paths, remove_stale_buffers, stale_buffers


def test_only_new_unmapped_buffers_are_removed(tmp_path):
    old = tmp_path / "deepspeed_allreduce_buffer_0_127.0.0.1_29500_0"
    new = tmp_path / "deepspeed_allreduce_buffer_0_127.0.0.1_29611_0"
    busy = tmp_path / "deepspeed_allreduce_buffer_1_127.0.0.1_29611_0"
    other = tmp_path / "unrelated_file"
    for path in (old, new, busy, other):
        path.write_bytes(b"\0" * 4096)
    os.utime(old, (1000.0, 1000.0))
    since = os.path.getmtime(new) - 1
    with open(busy, "r+b") as handle, mmap.mmap(handle.fileno(), 4096):
        assert str(busy) in mapped_paths()
        assert stale_buffers(str(tmp_path), since, mapped_paths()) == [str(new)]
        assert remove_stale_buffers(str(tmp_path), since) == [str(new)]
    assert old.exists() and busy.exists() and other.exists() and not new.exists()
