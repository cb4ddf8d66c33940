"""The CLUE paper's tables as data (Xu et al., COLING 2020; shared/papers/
clue_xu_et_al_coling2020.md): Table 2's columns, which tasks fill them and with which
metric (`cmrcx.eval --mixture=clue` prints its row in this order), and Table 7's
fine-tuning settings, cell by cell (`tools/make_clue_gin.py` writes one gin file per
task and model from them). CMNLI is not in Table 7: its values are CLUE's run script
(baselines/models_pytorch/classifier_pytorch/run_classifier_cmnli.sh @0059793). OCNLI
has no cell for BERT-wwm-ext and RoBERTa-large: they take the BERT-base cell, as the run
script (run_classifier_ocnli.sh) does for every model. XLNet-mid's CMNLI values are CLUE's
XLNet script's (baselines/models/xlnet/run_classifier_cmnli.sh @d7ec875). ALBERT-xxlarge is in no
cell of Table 7 (its "All*" omits it): it takes the cells All* falls to, each marked so;
on OCNLI, the BERT-base cell.
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

# Table 7's models: the name in gin file names -> the name in Tables 2 and 7.
TABLE_7_MODELS = {
    "bert": "BERT-base",
    "bert_wwm_ext": "BERT-wwm-ext-base",
    "ernie": "ERNIE-base",
    "roberta_large": "RoBERTa-large",
    "roberta_wwm_ext": "RoBERTa-wwm-ext-base",
    "roberta_wwm_ext_large": "RoBERTa-wwm-ext-large",
    "xlnet_mid": "XLNet-mid",
    "albert_tiny": "ALBERT-tiny",
    "albert_xxlarge": "ALBERT-xxlarge",
}
# Table 7's "All*" (its caption's list): every model above but ALBERT-xxlarge, which no
# cell of Table 7 names. Its rows below take the cell of All* (the cell "All* except ..."
# falls to), each marked "not in Table 7".
ALL = tuple(name for name in TABLE_7_MODELS if name != "albert_xxlarge")
EVERY = tuple(TABLE_7_MODELS)  # CMNLI: not in Table 7, one run script for all
_XXLARGE = "not in Table 7 (All* does not list ALBERT-xxlarge): the cell"
# data set -> [(models, batch size, max length, epochs, learning rate, source cell)]
TABLE_7 = {
    "afqmc": [
        (ALL, 16, 128, 3, "2e-5", "Table 7, AFQMC / All*"),
        (("albert_xxlarge",), 16, 128, 3, "2e-5", f"{_XXLARGE} AFQMC / All*"),
    ],
    "tnews": [
        (ALL, 16, 128, 3, "2e-5", "Table 7, TNEWS / All*"),
        (("albert_xxlarge",), 16, 128, 3, "2e-5", f"{_XXLARGE} TNEWS / All*"),
    ],
    "iflytek": [
        (("albert_tiny",), 32, 128, 10, "2e-5", "Table 7, IFLYTEK / ALBERT-tiny"),
        (("roberta_large", "roberta_wwm_ext_large"), 24, 128, 3, "2e-5",
         "Table 7, IFLYTEK / RoBERT-large, RoBERTa-wwm-ext-large"),
        (("bert", "bert_wwm_ext", "ernie", "roberta_wwm_ext", "xlnet_mid"), 32, 128, 3, "2e-5",
         "Table 7, IFLYTEK / All* except above"),
        (("albert_xxlarge",), 32, 128, 3, "2e-5", f"{_XXLARGE} IFLYTEK / All* except above"),
    ],
    "ocnli": [
        (("bert", "roberta_wwm_ext_large"), 32, 128, 3, "2e-5",
         "Table 7, OCNLI / BERT-base, RoBERTa-wwm-ext-large"),
        (("roberta_wwm_ext", "ernie"), 32, 128, 3, "3e-5",
         "Table 7, OCNLI / RoBERTa-wwm-ext, ERNIE"),
        (("xlnet_mid",), 32, 128, 3, "5e-5", "Table 7, OCNLI / XLNET-mid"),
        (("albert_tiny",), 32, 128, 4, "5e-5", "Table 7, OCNLI / ALBERT-tiny"),
        (("bert_wwm_ext", "roberta_large", "albert_xxlarge"), 32, 128, 3, "2e-5",
         "not in Table 7 (OCNLI lists no cell for this model): the BERT-base cell"),
    ],
    "cmnli": [
        (tuple(m for m in EVERY if m != "xlnet_mid"), 16, 128, 2, "3e-5",
         "not in Table 7: CLUE's run_classifier_cmnli.sh @0059793"),
        (("xlnet_mid",), 32, 128, 3, "2e-5",
         "not in Table 7: CLUE's baselines/models/xlnet/run_classifier_cmnli.sh @d7ec875"),
    ],
    "cluewsc2020": [
        (("albert_tiny",), 8, 128, 50, "1e-4", "Table 7, CLUEWSC2020 / ALBERT-tiny"),
        (tuple(name for name in ALL if name != "albert_tiny"), 8, 128, 50, "2e-5",
         "Table 7, CLUEWSC2020 / All* except ALBERT-tiny"),
        (("albert_xxlarge",), 8, 128, 50, "2e-5",
         f"{_XXLARGE} CLUEWSC2020 / All* except ALBERT-tiny"),
    ],
    "csl": [
        (("roberta_large",), 4, 256, 5, "5e-6", "Table 7, CSL / RoBERTa-large"),
        (("bert", "bert_wwm_ext", "ernie", "roberta_wwm_ext", "roberta_wwm_ext_large",
          "xlnet_mid", "albert_tiny"), 4, 256, 5, "1e-5", "Table 7, CSL / All* except above"),
        (("albert_xxlarge",), 4, 256, 5, "1e-5", f"{_XXLARGE} CSL / All* except above"),
    ],
    "cmrc2018": [
        (("albert_tiny",), 32, 512, 3, "2e-4", "Table 7, CMRC* / ALBERT-tiny"),
        (("roberta_wwm_ext_large",), 32, 512, 2, "2.5e-5",
         "Table 7, CMRC* / RoBERTa-wwm-ext-large"),
        (("roberta_large",), 32, 256, 2, "3e-5", "Table 7, CMRC* / RoBERTa-large"),
        (("roberta_wwm_ext", "xlnet_mid"), 32, 512, 2, "3e-5",
         "Table 7, CMRC* / XLNET-mid, RoBERTa-wwm-ext-base"),
        (("bert", "bert_wwm_ext", "ernie"), 32, 512, 2, "3e-5",
         "Table 7, CMRC* / All* except above"),
        (("albert_xxlarge",), 32, 512, 2, "3e-5", f"{_XXLARGE} CMRC* / All* except above"),
    ],
    "chid": [
        (ALL, 24, 64, 3, "2e-5", "Table 7, CHID / All*"),
        (("albert_xxlarge",), 24, 64, 3, "2e-5", f"{_XXLARGE} CHID / All*"),
    ],
    "c3": [
        (ALL, 24, 512, 8, "2e-5", "Table 7, C^3 / All*"),
        (("albert_xxlarge",), 24, 512, 8, "2e-5", f"{_XXLARGE} C^3 / All*"),
    ],
}  # fmt: skip

# Table 2, the published test results: model -> (Avg, then the columns of CLUE_TABLE_2 in
# its order: TNEWS, IFLYTEK, CLUEWSC2020, AFQMC, CSL, OCNLI, CMRC (EM), ChID, C3).
# tools/reproduce_clue.sh prints a model's row beside the reproduced one.
TABLE_2 = {
    "BERT-base": (69.20, 56.58, 60.29, 63.45, 73.70, 80.36, 72.20, 69.72, 82.04, 64.50),
    "BERT-wwm-ext-base": (70.27, 56.84, 59.43, 62.41, 74.07, 80.63, 74.42, 73.23, 82.90, 68.50),
    "ALBERT-tiny": (56.01, 53.35, 48.71, 63.38, 69.92, 74.56, 65.12, 53.68, 43.53, 31.86),
    "ALBERT-xxlarge": (72.49, 59.46, 62.89, 61.54, 75.60, 83.63, 77.70, 75.15, 83.15, 73.28),
    "ERNIE-base": (69.72, 58.33, 58.96, 63.44, 73.83, 79.10, 74.11, 73.32, 82.28, 64.10),
    "XLNet-mid": (68.58, 56.24, 57.85, 61.04, 70.50, 81.26, 72.63, 66.51, 83.47, 67.68),
    "RoBERTa-large": (71.01, 57.86, 62.55, 62.44, 74.02, 81.36, 76.82, 76.11, 84.50, 63.44),
    "RoBERTa-wwm-ext-base": (71.17, 56.94, 60.31, 72.07, 74.04, 81.00, 74.72, 73.89, 83.62, 63.90),
    "RoBERTa-wwm-ext-large": (74.90, 58.61, 62.98, 81.38, 76.55, 82.13, 78.20, 76.58, 85.37, 72.32),
}
