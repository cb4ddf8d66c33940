"""The bottom of the import graph (no JAX, no TensorFlow): errors, files, paths."""
