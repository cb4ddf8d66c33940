"""TensorFlow's start-up chatter is dropped; everything else on stderr still shows."""

from __future__ import annotations

import os
import subprocess
import sys

from cmrcx.common.quiet_start import filter_startup_lines

CHATTER = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795431759.547198    9074 port.cc:153] oneDNN custom operations are on. You may \
see slightly different numerical results.
I0000 00:00:1795431759.548182    9074 cudart_stub.cc:31] Could not find cuda drivers on your \
machine, GPU will not be used.
E0000 00:00:1795431762.547732    9074 cuda_platform.cc:52] failed call to cuInit: INTERNAL: \
CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
"""


def test_known_lines_dropped_others_kept() -> None:
    real = "E0000 00:00:17.5 9074 op_kernel.cc:1] OUT_OF_RANGE: something real\n"
    text = CHATTER + real + "Traceback (most recent call last):\n" + CHATTER
    assert filter_startup_lines(text) == real + "Traceback (most recent call last):\n"


def test_import_is_quiet_and_leaves_jax_devices_alone() -> None:
    code = (
        "import os, sys\n"
        "from cmrcx.common import quiet_start\n"
        "tf = quiet_start.import_tensorflow()\n"
        "assert tf.config.get_visible_devices('GPU') == []\n"
        "print('after import', file=sys.stderr)\n"
        "print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('JAX_PLATFORMS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == "after import\n"
    # No device hidden from JAX: its environment is as the parent's.
    unchanged = f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {os.environ.get('JAX_PLATFORMS')}\n"
    assert out.stdout == unchanged
