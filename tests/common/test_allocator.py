"""allocator: with glibc's settings applied, a freed large block is reused, not mapped
afresh (no page faults the second time)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# A 64 MB block malloc'ed, written and freed twice, in a thread started after `setup`
# (as XLA's workers are): the minor page faults of the second time.
PROBE = """
import concurrent.futures, ctypes, resource
{setup}
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def faults_of_fill(size=64 * 2**20):
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start
def twice():
    faults_of_fill()
    return faults_of_fill()
with concurrent.futures.ThreadPoolExecutor(1) as pool:
    print(pool.submit(twice).result())
"""
RETAIN = "from cmrcx.common import allocator; assert allocator.retain_freed_memory()"


def second_fill_faults(setup: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_freed_block_is_reused():
    pages = 64 * 2**20 // 4096
    assert second_fill_faults("") > pages // 2  # glibc's default: mapped afresh
    assert second_fill_faults(RETAIN) < pages // 20
