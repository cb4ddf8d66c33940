"""The CLUE paper's tables as data (Xu et al., COLING 2020; shared/papers/
clue_xu_et_al_coling2020.md): Table 2's columns, which tasks fill them and with which
metric. `cmrcx.eval --mixture=clue` prints its row in this order.
"""

from __future__ import annotations

# Table 2's columns, in its order: (column, tasks that fill it, the preferred first). The
# leaderboard's current versions (1.1) come before the 1.0 ones.
CLUE_TABLE_2 = (
    ("TNEWS", ("clue_tnews11", "clue_tnews10")),
    ("IFLYTEK", ("clue_iflytek",)),
    ("CLUEWSC2020", ("clue_cluewsc11", "clue_cluewsc10")),
    ("AFQMC", ("clue_afqmc",)),
    ("CSL", ("clue_csl",)),
    ("OCNLI", ("clue_ocnli",)),
    ("CMRC", ("clue_cmrc2018",)),
    ("ChID", ("clue_chid11", "clue_chid10")),
    ("C3", ("clue_c311", "clue_c310")),
)
# Evaluated and submitted too, but not in Table 2's average.
CLUE_EXTRA = (("CMNLI", ("clue_cmnli",)),)
METRICS = {"clue_cmrc2018": "EM"}  # every other task: accuracy (ChID: the baseline decoding)
