"""TensorFlow without its start-up chatter, for the entry points.

TensorFlow only feeds data here (JAX owns the devices), yet importing it on a CPU
machine prints, twice (two of its libraries log on load), lines such as::

    I0000 ... port.cc:153] oneDNN custom operations are on. ...
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, ...
    E0000 ... cuda_platform.cc:52] failed call to cuInit: ... UNKNOWN ERROR (303)

and a user reads an `E` line as something broken. They are written by C++ code
before any logging set-up (absl's pre-init logging ignores TF_CPP_MIN_LOG_LEVEL),
so `import_tensorflow` captures file descriptor 2 while TensorFlow loads and hides
its GPU, drops exactly these known lines and writes everything else back to stderr:
an unexpected message, or a real error, still shows. TF_CPP_MIN_LOG_LEVEL defaults
to 1 (TF and XLA INFO lines off, warnings and errors kept); a value set by the user
wins. JAX's own device messages are Python logging and untouched.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

# Start-up lines of TensorFlow's CPU and CUDA-stub libraries that carry no
# information for a run that keeps TF off accelerators.
BENIGN_LINES = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} .*(?:"
    r"oneDNN custom operations are on"
    r"|Could not find cuda drivers on your machine"
    r"|failed call to cuInit"
    r"|This TensorFlow binary is optimized to use available CPU instructions"
    r"|Unable to register cu(?:DNN|FFT|BLAS) factory"
    r"|computation placer already registered"
    r"|TF-TRT Warning: Could not find TensorRT"
    r"|Attempting to register factory for plugin"
    r")"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate"
)


def filter_startup_lines(text: str) -> str:
    """`text` without the lines BENIGN_LINES matches (line breaks of the rest kept)."""
    kept = [line for line in text.splitlines(True) if not BENIGN_LINES.match(line.strip())]
    return "".join(kept)


def import_tensorflow():
    """Imports tensorflow and tensorflow_text quietly, with TF's view of GPUs removed.

    Returns the tensorflow module. Safe to call again (then it only returns it).
    """
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        return tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf
            import tensorflow_text  # noqa: F401  (loads its own copy of the chatter)

            tf.config.set_visible_devices([], "GPU")  # probes CUDA: the cuInit line
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            rest = filter_startup_lines(captured.read().decode("utf-8", "replace"))
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()
    return tf
