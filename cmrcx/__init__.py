"""cmrcx: JAX/Flax reproductions of the CMRC 2019, CLUE and LOT baselines."""

import sys

# PyTorch (the `convert` and `test` extras) serves cmrcx on the CPU only: reading `.bin`
# checkpoints and the parity tests against transformers. PyPI's torch for Linux is the
# CUDA build, which brings triton; importing triton in a process that has loaded
# TensorFlow, as every cmrcx run has, kills it with SIGSEGV (seen with torch 2.13.0,
# triton 3.x and TensorFlow 2.21 on Python 3.12, when transformers imports
# torch._dynamo). Unless something imported triton already, cmrcx hides it, so that
# torch sees no triton, as with its CPU build.
if "triton" not in sys.modules:
    sys.modules["triton"] = None
