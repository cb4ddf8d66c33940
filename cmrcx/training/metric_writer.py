"""Metric lines: MODEL_DIR/metrics.jsonl (one JSON object per line) and TensorBoard.

Only process 0 writes, so a multi-host run logs once.
"""

from __future__ import annotations

import json
import os
import time

import jax


class MetricWriter:
    def __init__(self, model_dir: str):
        self.enabled = jax.process_index() == 0
        self.path = os.path.join(model_dir, "metrics.jsonl")
        self._summary = None
        if self.enabled:
            import tensorflow as tf

            os.makedirs(model_dir, exist_ok=True)
            self._summary = tf.summary.create_file_writer(os.path.join(model_dir, "events"))

    def write(self, step: int, split: str, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        import tensorflow as tf

        record = {"step": int(step), "split": split, "time": round(time.time(), 3), **metrics}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        with self._summary.as_default(step=int(step)):
            for name, value in metrics.items():
                tf.summary.scalar(f"{split}/{name}", value)
        self._summary.flush()
