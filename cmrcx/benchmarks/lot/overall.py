"""LOT's weighted overall scores: the paper's (Tables 10 and 11) and the OutGen
competition organisers' (their eval.py's 加权总得分). They are different scores; do not mix
them (the paper's Tables 10 and 11; the organisers' eval.py, IndexFziQ/LongLM-Eyas
datasets/chn/eval.py).

Paper. Section 3.5 has no body in the published text; the formula below reproduces every
printed Overall value of Tables 10 and 11 to +-0.01 but one (LongLM-large, understanding,
test: 73.79, printed 73.39, `paper.TABLE_10_INCONSISTENT`):

    S = sum_i w_i * s_i,   w_i = (h_i / b_i) / sum_j (h_j / b_j),   per split, in %

with h the human scores and b a baseline's: understanding (Table 10, [ClozeT, SenPos])
h = Humans, b = BERT-base; generation (Table 11, the ten columns of
`paper.TABLE_11_COLUMNS`) h = Truth, b = GPT2-base. The weights the tables print are
rounded and do not give the printed values; these are computed unrounded.

Organisers (IndexFziQ/LongLM-Eyas@7a1c41d datasets/chn/eval.py, `overall_score_w` and
`compute`): w_i = (human_i / small_i) normalised (their function is misnamed `softmax`),
with LongLM-small as the baseline, over [bleu-1, bleu-2, distinct-3, distinct-4, coverage,
order] as fractions, distinct-n being the script's character-level count. The script has
the validation vectors active and the test ones commented out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cmrcx.benchmarks.lot import paper


def weights(human: Sequence[float], baseline: Sequence[float]) -> tuple[float, ...]:
    """w_i = (h_i / b_i) / sum_j (h_j / b_j)."""
    if len(human) != len(baseline):
        raise ValueError(f"{len(human)} human scores but {len(baseline)} baseline scores")
    ratios = [h / b for h, b in zip(human, baseline, strict=True)]
    return tuple(r / sum(ratios) for r in ratios)


def _anchors(table, split: str, human: str, baseline: str) -> tuple[float, ...]:
    return weights(paper.row(table, split, human).scores, paper.row(table, split, baseline).scores)


def understanding_weights(split: str) -> tuple[float, ...]:
    """Table 10's (ClozeT, SenPos) weights of `split`: validation (.3666, .6334), test
    (.3911, .6089)."""
    return _anchors(paper.TABLE_10, split, paper.UNDERSTANDING_HUMAN, paper.UNDERSTANDING_BASELINE)


def generation_weights(split: str) -> tuple[float, ...]:
    """Table 11's ten weights of `split`, in `paper.TABLE_11_COLUMNS` order."""
    return _anchors(paper.TABLE_11, split, paper.GENERATION_HUMAN, paper.GENERATION_BASELINE)


def _weighted(w: Sequence[float], scores: Sequence[float]) -> float:
    if len(scores) != len(w):
        raise ValueError(f"expected {len(w)} scores (the table's columns), got {len(scores)}")
    return sum(wi * si for wi, si in zip(w, scores, strict=True))


def understanding_overall(split: str, scores: Sequence[float]) -> float:
    """Table 10's Overall (%) of [ClozeT accuracy, SenPos accuracy] in % on `split`
    ("validation" or "test")."""
    return _weighted(understanding_weights(split), scores)


def generation_overall(split: str, scores: Sequence[float]) -> float:
    """Table 11's Overall (%) of the ten scores in % (`paper.TABLE_11_COLUMNS` order:
    PlotCom B-1 B-2 D-1 D-2, OutGen B-1 B-2 D-1 D-2 Cover Order; D-n word-level)."""
    return _weighted(generation_weights(split), scores)


def table_scores(
    columns: Sequence[tuple[str, str, str]], metrics: Mapping[str, Mapping[str, float]]
) -> tuple[float, ...]:
    """A table's scores in % from metric dicts of fractions.

    columns: `paper.TABLE_10_COLUMNS` or `paper.TABLE_11_COLUMNS`.
    metrics: registered task name -> its metric dict (`understanding_metrics`,
      `generation_metrics`), e.g. {"lot_clozet": {"accuracy": 0.8}, ...}.
    """
    missing = [f"{task} {key}" for _, task, key in columns if key not in metrics.get(task, {})]
    if missing:
        raise KeyError(f"the table needs {', '.join(missing)}")
    return tuple(100.0 * metrics[task][key] for _, task, key in columns)


# The organisers' vectors, in ORGANISERS_METRICS order (their eval.py `compute`).
ORGANISERS_METRICS = ("bleu-1", "bleu-2", "distinct-3", "distinct-4", "coverage", "order")
ORGANISERS_HUMAN = {
    "validation": (100, 100, 23.47, 42.17, 100, 100),  # "val-w", active
    "test": (100, 100, 21.28, 39.54, 100, 100),  # "test-w", commented out
}
ORGANISERS_LONGLM_SMALL = {
    "validation": (26.58, 16.04, 17.90, 31.38, 83.64, 63.15),
    "test": (29.42, 17.97, 16.17, 29.15, 83.87, 64.10),
}


def organisers_weights(split: str = "validation") -> tuple[float, ...]:
    """Their `overall_score_w(human, small)`: validation (.2438 .4040 .0850 .0871 .0775
    .1026), test (.2362 .3867 .0915 .0943 .0829 .1084)."""
    human, small = ORGANISERS_HUMAN[split], ORGANISERS_LONGLM_SMALL[split]
    ratios = [h / s for h, s in zip(human, small, strict=True)]
    return tuple(float(r / np.sum(ratios)) for r in ratios)  # their `softmax`


def organisers_weighted_score(metrics: Mapping[str, float], split: str = "validation") -> float:
    """The organisers' 加权总得分 of an OutGen metric dict (fractions, the keys of
    `generation_metrics`), with their validation weights by default as their script."""
    missing = [key for key in ORGANISERS_METRICS if key not in metrics]
    if missing:
        raise KeyError(f"the organisers' weighted score needs {', '.join(missing)}")
    w = organisers_weights(split)
    total = 0.0
    for wi, key in zip(w, ORGANISERS_METRICS, strict=True):  # their order of the sum
        total += wi * metrics[key]
    return total
