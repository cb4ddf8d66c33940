"""glibc malloc settings that keep a training step's buffers mapped between steps.

XLA on CPU allocates each step's temporaries with malloc: for BERT-base at batch 2 x
512 one 2.4 GB block, freed at the end of the step. glibc serves a block that large
with mmap and returns it with munmap on free, so every step maps 2.4 GB afresh and
the kernel zero-fills it page by page on first touch: 588k minor page faults and
1.2 s of system time per step (tools/bench.py train), inside the step's first kernels.
PyTorch's step, whose tensors glibc mostly serves from its heaps, has about 140k.

`retain_freed_memory()` makes glibc serve every size from its heap and never give
the heap back, so the next step reuses the same pages (0 faults per step once the heap
has grown to the step's peak). The cost: the process keeps its peak heap mapped, which
a training run needs again at every step anyway, and when small blocks split a freed
step buffer the heap grows once more by a step's buffers (a 6-layer BERT step: 3.1 GiB
resident, 4.3 GiB from its 9th step on, then steady). Threads share one heap (one arena):
XLA's worker threads would otherwise each get a side heap, capped at 64 MB, from which
glibc again maps large blocks one by one. Set before the process starts threads
that allocate (`launch.prepare_process` does); the malloc results are unchanged.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt(3) parameters (glibc malloc.h) and the values set.
M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8
SETTINGS = (
    (M_ARENA_MAX, 1),  # one heap for all threads, so large blocks come from it too
    (M_MMAP_MAX, 0),  # no block served by its own mmap
    (M_TRIM_THRESHOLD, -1),  # never return the heap's top to the kernel (-1: off)
)


def retain_freed_memory() -> bool:
    """Applies SETTINGS through glibc's mallopt. False where there is no glibc (musl,
    macOS: the allocator is left as it is) or glibc refused a setting."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
        gnu_get_libc_version = ctypes.CDLL(name).gnu_get_libc_version  # glibc only
    except (OSError, AttributeError, TypeError):
        return False
    del gnu_get_libc_version
    return all(mallopt(param, value) == 1 for param, value in SETTINGS)
