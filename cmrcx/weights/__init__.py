"""Checkpoint formats: HuggingFace / TF readers and writers, one module per model family
with the same function names."""
