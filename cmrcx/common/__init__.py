"""The bottom of the import graph: errors, files, paths, and TensorFlow imported without
its start-up chatter. Importing any module here imports no JAX and no TensorFlow."""
