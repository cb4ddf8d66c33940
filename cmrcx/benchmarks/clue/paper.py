"""The CLUE paper's tables as data (Xu et al., COLING 2020; shared/papers/
clue_xu_et_al_coling2020.md): Table 2's columns, which tasks fill them and with which
metric (`cmrcx.eval --mixture=clue` prints its row in this order), and Table 7's
fine-tuning settings, cell by cell (`tools/make_clue_gin.py` writes one gin file per
task and model from them). CMNLI is not in Table 7: its values are CLUE's run script
(baselines/models_pytorch/classifier_pytorch/run_classifier_cmnli.sh @0059793). OCNLI
has no cell for BERT-wwm-ext and RoBERTa-large: they take the BERT-base cell, as the run
script (run_classifier_ocnli.sh) does for every model. XLNet-mid's CMNLI values are CLUE's
XLNet script's (baselines/models/xlnet/run_classifier_cmnli.sh @d7ec875).
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
}
ALL = tuple(TABLE_7_MODELS)
# data set -> [(models, batch size, max length, epochs, learning rate, source cell)]
TABLE_7 = {
    "afqmc": [(ALL, 16, 128, 3, "2e-5", "Table 7, AFQMC / All*")],
    "tnews": [(ALL, 16, 128, 3, "2e-5", "Table 7, TNEWS / All*")],
    "iflytek": [
        (("roberta_large", "roberta_wwm_ext_large"), 24, 128, 3, "2e-5",
         "Table 7, IFLYTEK / RoBERT-large, RoBERTa-wwm-ext-large"),
        (("bert", "bert_wwm_ext", "ernie", "roberta_wwm_ext", "xlnet_mid"), 32, 128, 3, "2e-5",
         "Table 7, IFLYTEK / All* except above"),
    ],
    "ocnli": [
        (("bert", "roberta_wwm_ext_large"), 32, 128, 3, "2e-5",
         "Table 7, OCNLI / BERT-base, RoBERTa-wwm-ext-large"),
        (("roberta_wwm_ext", "ernie"), 32, 128, 3, "3e-5",
         "Table 7, OCNLI / RoBERTa-wwm-ext, ERNIE"),
        (("xlnet_mid",), 32, 128, 3, "5e-5", "Table 7, OCNLI / XLNET-mid"),
        (("bert_wwm_ext", "roberta_large"), 32, 128, 3, "2e-5",
         "not in Table 7 (OCNLI lists no cell for this model): the BERT-base cell"),
    ],
    "cmnli": [
        (tuple(m for m in ALL if m != "xlnet_mid"), 16, 128, 2, "3e-5",
         "not in Table 7: CLUE's run_classifier_cmnli.sh @0059793"),
        (("xlnet_mid",), 32, 128, 3, "2e-5",
         "not in Table 7: CLUE's baselines/models/xlnet/run_classifier_cmnli.sh @d7ec875"),
    ],
    "cluewsc2020": [(ALL, 8, 128, 50, "2e-5", "Table 7, CLUEWSC2020 / All* except ALBERT-tiny")],
    "csl": [
        (("roberta_large",), 4, 256, 5, "5e-6", "Table 7, CSL / RoBERTa-large"),
        (("bert", "bert_wwm_ext", "ernie", "roberta_wwm_ext", "roberta_wwm_ext_large",
          "xlnet_mid"), 4, 256, 5, "1e-5", "Table 7, CSL / All* except above"),
    ],
    "cmrc2018": [
        (("roberta_wwm_ext_large",), 32, 512, 2, "2.5e-5",
         "Table 7, CMRC* / RoBERTa-wwm-ext-large"),
        (("roberta_large",), 32, 256, 2, "3e-5", "Table 7, CMRC* / RoBERTa-large"),
        (("roberta_wwm_ext", "xlnet_mid"), 32, 512, 2, "3e-5",
         "Table 7, CMRC* / XLNET-mid, RoBERTa-wwm-ext-base"),
        (("bert", "bert_wwm_ext", "ernie"), 32, 512, 2, "3e-5",
         "Table 7, CMRC* / All* except above"),
    ],
    "chid": [(ALL, 24, 64, 3, "2e-5", "Table 7, CHID / All*")],
    "c3": [(ALL, 24, 512, 8, "2e-5", "Table 7, C^3 / All*")],
}  # fmt: skip
