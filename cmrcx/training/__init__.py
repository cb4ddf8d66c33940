"""Trainer, generic runner, partitioning, checkpoints and the input pipeline."""
