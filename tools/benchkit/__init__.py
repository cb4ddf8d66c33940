"""tools/bench.py's benchmarks: the harness and one module per model family."""
