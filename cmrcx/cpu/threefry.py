"""JAX's threefry random bits on CPU as one fused kernel instead of a loop.

JAX lowers its threefry2x32 hash on CPU as a rolled loop (five iterations of four
rounds) and on every other platform unrolled. XLA cannot fuse across the loop, so each
dropout mask of a training step costs five passes over uint32 arrays of the mask's size
in memory (attention dropout in BERT-base, batch 2 x 512: 12 layers x 25 MB each, with
a dozen fusions and copies per layer); unrolled, the hash and the comparison that makes
the mask are one elementwise fusion. `install()` registers the unrolled lowering for
CPU; the process start-up calls it (`cmrcx.cpu.enable`), the trainer does not. The hash
is the same function (Salmon et al. 2011, Threefry-2x32 with 20 rounds, as
`jax._src.random.threefry2x32`), so the bits, and every dropout mask, are identical;
tests/cpu/test_threefry.py checks the Random123 known-answer vectors.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir

# Threefry-2x32 rotation constants of rounds 1-4 and 5-8 (Random123's R_32x2_*).
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
KEY_PARITY = np.uint32(0x1BD11BDA)  # Threefish's key schedule constant C240


def _rotate_left(x, d: int):
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(key1, key2, x1, x2):
    """The 20-round Threefry-2x32 hash of counters (x1, x2) under key (key1, key2).

    All uint32, of one shape (the key may be scalars); returns the two output words.
    """
    keys = (key1, key2, key1 ^ key2 ^ KEY_PARITY)
    x1, x2 = x1 + keys[0], x2 + keys[1]
    for block in range(5):  # 5 blocks of 4 rounds, a key injection after each
        for rotation in ROTATIONS[block % 2]:
            x1 = x1 + x2
            x2 = _rotate_left(x2, rotation) ^ x1
        x1 = x1 + keys[(block + 1) % 3]
        x2 = x2 + keys[(block + 2) % 3] + np.uint32(block + 1)
    return x1, x2


def _lowering(key1, key2, x1, x2):
    return threefry2x32(*(jnp.asarray(v, jnp.uint32) for v in (key1, key2, x1, x2)))


def install() -> None:
    """Lowers threefry2x32 on CPU unrolled (as JAX does on GPU and TPU). Idempotent."""
    mlir.register_lowering(
        threefry2x32_p, mlir.lower_fun(_lowering, multiple_results=True), platform="cpu"
    )
