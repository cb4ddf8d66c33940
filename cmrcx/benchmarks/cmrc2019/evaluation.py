"""From per-window blank logits to per-passage predictions and QAC/PAC.

The scoring task yields one example per (passage, candidate, window). Each blank
is scored in exactly one window per candidate (its max-context window), so the
host fills a [num_choices, num_blanks] logit table per passage and decodes it.
A table with an unfilled cell means a blank was lost: that is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from cmrcx.benchmarks.cmrc2019 import decoding

DECODING_MODES = ("paper", "baseline", "assignment")


class BlankLogitTable:
    """Accumulates window scores into one logit table per passage, in first-seen order."""

    def __init__(self):
        self.tables: dict[str, np.ndarray] = {}
        self.filled: dict[str, np.ndarray] = {}

    def add(self, blank_logits: np.ndarray, examples: Mapping[str, np.ndarray]) -> None:
        """blank_logits: float [n, max_blanks] for the n real rows of `examples`."""
        for row, logits in enumerate(blank_logits):
            context_id = examples["context_id"][row]
            context_id = context_id.decode() if isinstance(context_id, bytes) else str(context_id)
            num_blanks = int(examples["num_blanks"][row])
            if context_id not in self.tables:
                shape = (int(examples["num_choices"][row]), num_blanks)
                self.tables[context_id] = np.zeros(shape, np.float32)
                self.filled[context_id] = np.zeros(shape, bool)
            choice = int(examples["choice_index"][row])
            scored = examples["blank_is_max_context"][row][:num_blanks] > 0
            self.tables[context_id][choice, scored] = logits[:num_blanks][scored]
            self.filled[context_id][choice, scored] = True

    def check_complete(self) -> None:
        """Raises if any (candidate, blank) pair was never scored."""
        for context_id, filled in self.filled.items():
            if not filled.all():
                choices, blanks = np.nonzero(~filled)
                raise RuntimeError(
                    f"passage {context_id}: blanks {sorted(set(blanks + 1))} were not scored "
                    f"for candidates {sorted(set(choices))} (windowing lost them)"
                )


def decode_all(tables: Mapping[str, np.ndarray], mode: str) -> dict[str, list[int]]:
    """{context_id: [choice index per blank]} in the official prediction format."""
    return {context_id: decoding.decode(mode, table) for context_id, table in tables.items()}


def score_modes(
    decoded: Mapping[str, Mapping[str, list[int]]],
    answers: Mapping[str, list[int]],
    metric_fns: Iterable[Callable],
) -> dict[str, float]:
    """Each mode's predictions ({mode: decode_all(...)}) scored with the task's metric fns.

    Returns {"qac/paper": .., "pac/paper": .., ...}; a passage without a prediction
    scores as an empty list.
    """
    results = {}
    context_ids = list(answers)
    targets = [answers[c] for c in context_ids]
    for mode, predictions in decoded.items():
        ordered = [predictions.get(c, []) for c in context_ids]
        for metric_fn in metric_fns:
            for name, value in metric_fn(targets, ordered).items():
                results[f"{name}/{mode}"] = float(value)
    return results


def results_table(results: Mapping[str, float], split: str) -> str:
    """QAC/PAC per decoding mode as aligned text lines, for the terminal."""
    lines = [f"{split:<12} {'QAC':>7} {'PAC':>7}"]
    for mode in DECODING_MODES:
        if f"qac/{mode}" in results:
            lines.append(f"{mode:<12} {results[f'qac/{mode}']:7.2f} {results[f'pac/{mode}']:7.2f}")
    return "\n".join(lines)
