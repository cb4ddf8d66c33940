"""The LOT paper's result tables as data (Guan et al., TACL 2022; shared/papers/
lot_guan_et_al_tacl2022.md): Table 10 (understanding: ClozeT and SenPos accuracy) and
Table 11 (generation: PlotCom and OutGen BLEU, Distinct, Coverage, Order), every row of
both splits, in %, as printed. `cmrcx.benchmarks.lot.overall` computes the Overall
column from the anchor rows here (the weights derived from Tables 10 and 11).

Models are named as the tables name them (``BERTbase`` is ``BERT-base``; ``GPT2-base†``
is GPT2-base pretrained on LongLM's data). Splits are ``validation`` and ``test``.
The ``wi`` rows the tables print are rounded to two places and do not reproduce the
Overall column (`TABLE_10_PRINTED_WEIGHTS`, `TABLE_11_PRINTED_WEIGHTS`).
"""

from __future__ import annotations

import dataclasses

# The tasks of the tables: the paper's name -> the registered task name (`cmrcx.score`).
TASK_NAMES = {
    "ClozeT": "lot_clozet",
    "SenPos": "lot_senpos",
    "PlotCom": "lot_plotcom",
    "OutGen": "lot_outgen",
}
SPLITS = ("validation", "test")


@dataclasses.dataclass(frozen=True)
class TableRow:
    model: str  # as the table names it
    params: str  # the "# P" column: "102M", "1B", "N/A"
    scores: tuple[float, ...]  # %, in the table's column order (TABLE_10/11_COLUMNS)
    overall: float  # the printed Overall column, %


# Table 10's columns: (paper column, registered task, key of `understanding_metrics`).
TABLE_10_COLUMNS = (
    ("ClozeT", "lot_clozet", "accuracy"),
    ("SenPos", "lot_senpos", "accuracy"),
)
# Table 11's columns: (paper column, registered task, key of `generation_metrics`). The
# paper's D-n are word n-grams (Truth D-1 21.66 on OutGen val): `word-distinct-n`, not the
# public script's character-level `distinct-n`.
TABLE_11_COLUMNS = (
    ("PlotCom B-1", "lot_plotcom", "bleu-1"),
    ("PlotCom B-2", "lot_plotcom", "bleu-2"),
    ("PlotCom D-1", "lot_plotcom", "word-distinct-1"),
    ("PlotCom D-2", "lot_plotcom", "word-distinct-2"),
    ("OutGen B-1", "lot_outgen", "bleu-1"),
    ("OutGen B-2", "lot_outgen", "bleu-2"),
    ("OutGen D-1", "lot_outgen", "word-distinct-1"),
    ("OutGen D-2", "lot_outgen", "word-distinct-2"),
    ("OutGen Cover", "lot_outgen", "coverage"),
    ("OutGen Order", "lot_outgen", "order"),
)

# The overall score's anchors (section 5.3 and the tables): human performance h and the
# baseline b of w_i = (h_i / b_i) / sum_j (h_j / b_j).
UNDERSTANDING_HUMAN = "Humans"  # Table 10: 100 sampled examples, 3 annotators, majority vote
UNDERSTANDING_BASELINE = "BERT-base"
GENERATION_HUMAN = "Truth"  # Table 11: the ground-truth texts scored as predictions
GENERATION_BASELINE = "GPT2-base"


def _rows(text: str) -> tuple[TableRow, ...]:
    """Rows typed as the table prints them: model, # P, the scores, Overall."""
    rows = []
    for line in text.strip().splitlines():
        model, params, *numbers = line.split()
        *scores, overall = map(float, numbers)
        rows.append(TableRow(model, params, tuple(scores), overall))
    return tuple(rows)


# Table 10 (validation set, then test set).
TABLE_10 = {
    "validation": _rows("""
        Transformer    38M   55.78  17.38  31.46
        BERT-base      102M  70.75  40.13  51.36
        RoBERTa-base   102M  72.11  51.63  59.14
        GPT2-base      102M  70.07  37.78  49.62
        GPT2-base†     102M  74.49  39.25  52.17
        mT5-base       582M  72.45  63.25  66.62
        LongLM-small   60M   73.81  48.75  57.94
        LongLM-base    223M  75.17  64.38  68.34
        LongLM-large   1B    79.93  70.00  73.64
        Humans         N/A   99.00  97.00  97.73
    """),
    # LongLM-large's 73.39: the formula of every other row gives 73.79 (Table 10;
    # tests/benchmarks/lot/test_lot_overall.py).
    "test": _rows("""
        Transformer    38M   54.42  16.34  31.23
        BERT-base      102M  69.39  43.68  53.74
        RoBERTa-base   102M  67.69  51.35  57.74
        GPT2-base      102M  73.13  37.25  51.28
        GPT2-base†     102M  76.87  39.28  53.98
        mT5-base       582M  75.17  61.41  66.79
        LongLM-small   60M   77.21  53.07  62.51
        LongLM-base    223M  77.55  62.34  68.29
        LongLM-large   1B    80.61  69.41  73.39
        Humans         N/A  100.00  98.00  98.78
    """),
}
TABLE_10_PRINTED_WEIGHTS = {"validation": (0.37, 0.63), "test": (0.39, 0.61)}  # the wi rows
# The one printed Overall the formula does not give: (split, model) -> the formula's value.
TABLE_10_INCONSISTENT = {("test", "LongLM-large"): 73.79}

# Table 11 (validation set, then test set): PlotCom B-1 B-2 D-1 D-2, OutGen B-1 B-2 D-1
# D-2 Cover Order, Overall.
TABLE_11 = {
    "validation": _rows("""
        ConvS2S       58M   18.92   4.18  6.31 32.18   29.23  10.38  3.45 21.79  14.81  25.34 11.85
        Fusion        109M  20.56   4.69  8.63 35.73   29.22  10.34  3.39 22.67  17.41  26.55 12.61
        GPT2-base     102M  22.67   6.22 24.75 70.57   30.43  14.87 10.95 44.38  60.90  55.52 20.24
        GPT2-base†    102M  22.49   5.43 26.88 74.87   35.29  18.31 13.89 51.36  64.01  57.64 21.73
        PM            102M  22.11   5.49 23.89 69.74   31.81  14.94 12.99 50.56  62.98  56.75 20.45
        PW            102M  22.45   5.57 25.64 71.54   35.84  18.47 11.86 47.62  64.93  57.30 21.48
        mT5-base      582M  22.56   6.46 24.44 71.31   36.71  22.25 14.52 50.01  77.98  63.15 23.53
        LongLM-small  60M   21.78   7.11 20.17 59.63   35.03  19.17 10.80 39.70  62.53  56.53 21.02
        LongLM-base   223M  22.91   8.28 22.16 63.54   40.33  24.29 14.66 51.82  79.60  62.78 24.75
        LongLM-large  1B    23.76   8.70 25.93 72.18   42.79  24.91 16.13 57.71  80.46  64.36 26.12
        Truth         N/A  100.00 100.00 35.32 84.33  100.00 100.00 21.66 71.43 100.00 100.00 92.23
    """),
    "test": _rows("""
        ConvS2S       58M   19.60   4.20  6.00 32.42   29.00  10.14  1.60 13.95  15.45  25.77 11.27
        Fusion        109M  20.52   4.90  8.43 35.09   28.77  10.22  1.47 14.12  17.10  26.36 11.91
        GPT2-base     102M  22.94   5.76 24.69 70.30   30.17  14.91  7.62 36.87  60.87  55.90 19.21
        GPT2-base†    102M  22.45   5.38 26.08 73.26   35.79  18.68  9.89 43.52  64.43  56.96 20.76
        PM            102M  22.87   5.75 24.08 71.19   31.85  15.24  8.62 41.32  63.15  57.21 19.77
        PW            102M  22.76   6.07 25.55 70.72   35.12  17.96  8.68 40.17  63.70  55.17 20.52
        mT5-base      582M  22.52   6.48 24.33 70.53   36.33  22.07 10.90 43.65  78.66  63.79 22.59
        LongLM-small  60M   22.05   7.45 19.93 59.79   34.48  19.17  7.93 34.25  63.75  57.64 20.48
        LongLM-base   223M  23.28   8.58 21.37 62.43   40.25  24.15 10.75 44.40  79.88  63.67 23.93
        LongLM-large  1B    24.20   9.06 25.75 71.08   42.10  24.77 12.04 50.29  81.48  64.82 25.29
        Truth         N/A  100.00 100.00 35.01 84.56  100.00 100.00 15.71 63.46 100.00 100.00 91.64
    """),
}
TABLE_11_PRINTED_WEIGHTS = {  # the wi rows
    "validation": (0.11, 0.40, 0.04, 0.03, 0.08, 0.17, 0.05, 0.04, 0.04, 0.04),
    "test": (0.10, 0.42, 0.03, 0.03, 0.08, 0.16, 0.05, 0.04, 0.04, 0.04),
}


def row(table: dict[str, tuple[TableRow, ...]], split: str, model: str) -> TableRow:
    """The row of `model` in `table` (TABLE_10 or TABLE_11) on `split`; KeyError naming
    the models of that split otherwise."""
    if split not in table:
        raise KeyError(f"no split {split!r}; the tables have {', '.join(SPLITS)}")
    for r in table[split]:
        if r.model == model:
            return r
    raise KeyError(f"no model {model!r} on {split}: {', '.join(r.model for r in table[split])}")
