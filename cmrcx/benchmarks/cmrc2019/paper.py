"""Table 3 of Cui et al., COLING 2020 (shared/papers/cmrc2019_cui_et_al_coling2020.md):
the published QAC and PAC of each baseline on dev and test, by the table's row names,
which the six paper gin files give as RunConfig.paper_model."""

from __future__ import annotations

# row -> (dev QAC, dev PAC, test QAC, test PAC), in the table's order.
TABLE_3 = {
    "Human Performance": (95.9, 81.0, 95.3, 75.0),
    "Random Selection": (7.6, 0.0, 7.5, 0.0),
    "BERT": (71.2, 10.0, 71.0, 8.8),
    "BERT-multilingual": (66.8, 6.67, 66.0, 5.0),
    "BERT-wwm": (72.4, 9.3, 71.4, 7.6),
    "BERT-wwm-ext": (75.0, 12.7, 73.7, 9.2),
    "RoBERTa-wwm-ext": (75.9, 11.0, 75.8, 12.4),
    "RoBERTa-wwm-ext-L": (82.6, 23.3, 81.7, 23.0),
}


def published(model: str, split: str) -> tuple[float, float] | None:
    """(QAC, PAC) Table 3 gives `model` on `split` ("validation": dev, "test"), or None."""
    row = TABLE_3.get(model)
    if row is None or split not in ("validation", "test"):
        return None
    return row[:2] if split == "validation" else row[2:]
