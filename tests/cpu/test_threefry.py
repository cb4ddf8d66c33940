"""cmrcx.cpu.threefry: the unrolled hash is Threefry-2x32-20, and JAX's random bits on CPU
use it without a loop."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from cmrcx.cpu import threefry

# Random123's known-answer vectors for threefry2x32_20 (kat_vectors, as JAX's own
# random_test.py checks): (key, counter) -> output.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", KNOWN_ANSWERS)
def test_known_answers(key, counter, expected):
    words = threefry.threefry2x32(*np.uint32(key), *np.uint32(counter))
    assert tuple(int(w) for w in words) == expected


def test_jax_hash_uses_the_unrolled_lowering_with_the_same_bits():
    threefry.install()
    key = np.uint32([0x13198A2E, 0x03707344])
    counters = np.uint32([[0x243F6A88, 7, 0], [0x85A308D3, 8, 0xFFFFFFFF]])
    got = jax.jit(jax.extend.random.threefry_2x32)(key, counters.reshape(-1))
    expected = np.concatenate(threefry.threefry2x32(*key, *counters))
    np.testing.assert_array_equal(np.asarray(got), expected)
    assert np.asarray(got)[0] == 0xC4923A9C  # the third known answer, first word

    def bits(k):
        return jax.random.bits(k, (64,))

    text = jax.jit(bits).lower(jax.random.key(0)).as_text()
    assert "while" not in text  # JAX's own CPU lowering is a five-iteration loop
