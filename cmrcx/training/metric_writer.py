"""Metric lines: MODEL_DIR/metrics.jsonl (one JSON object per line) and TensorBoard.

Only process 0 writes, so a multi-host run logs once. A resumed run first `rewind`s the
file to its checkpoint's step: lines a killed run wrote after that step (and a line cut
short by the kill) go, so the file never holds a line the resumed run contradicts.
"""

from __future__ import annotations

import json
import os
import time

import jax

from cmrcx.common.files import write_atomically


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

    def rewind(self, step: int) -> int:
        """Drops the lines after `step` (a run resuming from `step`'s checkpoint writes them
        again) and any unreadable line (one cut short by a kill). Returns how many went."""
        if not self.enabled or not os.path.isfile(self.path):
            return 0
        with open(self.path, encoding="utf-8") as f:
            lines = f.readlines()
        steps = [_step_of(line) for line in lines]
        kept = [line for line, s in zip(lines, steps, strict=True) if s is not None and s <= step]
        if len(kept) == len(lines):
            return 0
        write_atomically(self.path, "".join(kept))
        print(
            f"{self.path}: dropped {len(lines) - len(kept)} line(s) written after step {step} "
            "by an interrupted run (this run writes them again)",
            flush=True,
        )
        return len(lines) - len(kept)

    def has_line(self, step: int, split: str) -> bool:
        """Whether metrics.jsonl holds a `split` line of `step` (e.g. an evaluation)."""
        if not os.path.isfile(self.path):
            return False
        with open(self.path, encoding="utf-8") as f:
            return any(
                _step_of(line) == step and json.loads(line).get("split") == split for line in f
            )


def _step_of(line: str) -> int | None:
    """The step of a whole metrics line; None for a line cut short or not a record."""
    if not line.endswith("\n"):
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) else None
