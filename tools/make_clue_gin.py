"""Writes gin_configs/clue/clue_<task>_<model>.gin: CLUE's Table 7, one file per (task, model).

    python tools/make_clue_gin.py            # (re)write the files
    python tools/make_clue_gin.py --check    # exit 1 if a file differs (tests run this)

The table below is Table 7 of Xu et al., COLING 2020 ("Parameters for fine-tuning"),
cell by cell; each generated file cites its cell. CMNLI is not in Table 7: its values
are CLUE's run script (baselines/models_pytorch/classifier_pytorch/
run_classifier_cmnli.sh @0059793: batch 16, length 128, 2 epochs, 3e-5). OCNLI has no
cell for BERT-wwm-ext and RoBERTa-large: they take the BERT-base cell, as the run script
(run_classifier_ocnli.sh) does for every model.

The reading-comprehension tasks (CMRC 2018, ChID, C3) include runs/clue_mrc_finetune.gin
(the MRC scripts' BERTAdam settings) and add what Table 7 does not give from CLUE's run
scripts (baselines/models_pytorch/mrc_pytorch/): the warm-up fraction and, for CMRC 2018,
the window stride; `MRC_SCRIPT_SETTINGS` cites them.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

GIN_DIR = pathlib.Path(__file__).resolve().parent.parent / "gin_configs" / "clue"

# model name in file names -> (Table 2/7 name, geometry models/<this>.gin, vocabulary_name)
MODELS = {
    "bert": ("BERT-base", "bert/base", "bert_chinese"),
    "bert_wwm_ext": ("BERT-wwm-ext-base", "bert/base", "bert_chinese"),
    "ernie": ("ERNIE-base", "bert/ernie_base", "ernie"),
    "roberta_large": ("RoBERTa-large", "bert/roberta_large", "bert_chinese"),
    "roberta_wwm_ext": ("RoBERTa-wwm-ext-base", "bert/base", "bert_chinese"),
    "roberta_wwm_ext_large": ("RoBERTa-wwm-ext-large", "bert/large", "bert_chinese"),
}

# CLUE data set -> the cmrcx tasks trained on it (both versions where 1.0 and 1.1 differ).
TASKS = {
    "afqmc": ("clue_afqmc",),
    "tnews": ("clue_tnews11", "clue_tnews10"),
    "iflytek": ("clue_iflytek",),
    "ocnli": ("clue_ocnli",),
    "cmnli": ("clue_cmnli",),
    "cluewsc2020": ("clue_cluewsc11", "clue_cluewsc10"),
    "csl": ("clue_csl",),
    "cmrc2018": ("clue_cmrc2018",),
    "chid": ("clue_chid11", "clue_chid10"),
    "c3": ("clue_c311", "clue_c310"),
}

ALL = tuple(MODELS)
# data set -> [(models, batch size, max length, epochs, learning rate, source cell)]
TABLE_7 = {
    "afqmc": [(ALL, 16, 128, 3, "2e-5", "Table 7, AFQMC / All*")],
    "tnews": [(ALL, 16, 128, 3, "2e-5", "Table 7, TNEWS / All*")],
    "iflytek": [
        (("roberta_large", "roberta_wwm_ext_large"), 24, 128, 3, "2e-5",
         "Table 7, IFLYTEK / RoBERT-large, RoBERTa-wwm-ext-large"),
        (("bert", "bert_wwm_ext", "ernie", "roberta_wwm_ext"), 32, 128, 3, "2e-5",
         "Table 7, IFLYTEK / All* except above"),
    ],
    "ocnli": [
        (("bert", "roberta_wwm_ext_large"), 32, 128, 3, "2e-5",
         "Table 7, OCNLI / BERT-base, RoBERTa-wwm-ext-large"),
        (("roberta_wwm_ext", "ernie"), 32, 128, 3, "3e-5",
         "Table 7, OCNLI / RoBERTa-wwm-ext, ERNIE"),
        (("bert_wwm_ext", "roberta_large"), 32, 128, 3, "2e-5",
         "not in Table 7 (OCNLI lists no cell for this model): the BERT-base cell"),
    ],
    "cmnli": [
        (ALL, 16, 128, 2, "3e-5",
         "not in Table 7: CLUE's run_classifier_cmnli.sh @0059793"),
    ],
    "cluewsc2020": [(ALL, 8, 128, 50, "2e-5", "Table 7, CLUEWSC2020 / All* except ALBERT-tiny")],
    "csl": [
        (("roberta_large",), 4, 256, 5, "5e-6", "Table 7, CSL / RoBERTa-large"),
        (("bert", "bert_wwm_ext", "ernie", "roberta_wwm_ext", "roberta_wwm_ext_large"), 4, 256, 5,
         "1e-5", "Table 7, CSL / All* except above"),
    ],
    "cmrc2018": [
        (("roberta_wwm_ext_large",), 32, 512, 2, "2.5e-5",
         "Table 7, CMRC* / RoBERTa-wwm-ext-large"),
        (("roberta_large",), 32, 256, 2, "3e-5", "Table 7, CMRC* / RoBERTa-large"),
        (("roberta_wwm_ext",), 32, 512, 2, "3e-5",
         "Table 7, CMRC* / XLNET-mid, RoBERTa-wwm-ext-base"),
        (("bert", "bert_wwm_ext", "ernie"), 32, 512, 2, "3e-5",
         "Table 7, CMRC* / All* except above"),
    ],
    "chid": [(ALL, 24, 64, 3, "2e-5", "Table 7, CHID / All*")],
    "c3": [(ALL, 24, 512, 8, "2e-5", "Table 7, C^3 / All*")],
}  # fmt: skip

CLASSIFICATION_RUN = "runs/clue_finetune.gin"
MRC_RUN = "runs/clue_mrc_finetune.gin"
_MRC_SCRIPTS = "CLUE's baselines/models_pytorch/mrc_pytorch/"
# MRC data set -> the generated lines Table 7 does not give (CLUE's run scripts).
MRC_SCRIPT_SETTINGS = {
    "cmrc2018": f"""\
# Not in Table 7: {_MRC_SCRIPTS}run_mrc_cmrc2018.sh @e9fbfd2
# (--warmup_rate=0.1) and preprocess/cmrc2018_preprocess.py @5c44cc2 (json2features:
# windows over the passage with doc_stride 128, the question cut to 64 tokens).
RunConfig.warmup_fraction = 0.1
RunConfig.doc_stride = 128
# Not RunConfig fields: the question's 64-token cap (max_query_length, above) and run_mrc.py
# @5c44cc2's decoding, answers of at most 50 tokens (max_ans_length) from the 20 best starts
# and ends (n_best), are cmrcx.benchmarks.clue.cmrc2018_windows' MAX_QUERY_TOKENS,
# MAX_ANSWER_TOKENS and N_BEST.
""",
    "chid": f"""\
# Not in Table 7: {_MRC_SCRIPTS}run_mrc_chid.sh @65dae35
# (--warmup_proportion=0.06).
RunConfig.warmup_fraction = 0.06
""",
    "c3": f"""\
# Not in Table 7: {_MRC_SCRIPTS}run_mrc_c3.sh @5c44cc2
# (--warmup_proportion=0.05, over run_c3.py's default 0.1). Its batch of 24 is 4 accumulated
# micro-batches of 6 (--gradient_accumulation_steps=4): RunConfig.grad_accum_steps = 4 does the
# same where memory needs it.
RunConfig.warmup_fraction = 0.05
""",
}


def gin_text(
    task: str,
    model: str,
    batch: int,
    length: int,
    epochs: int,
    lr: str,
    cell: str,
    run_file: str = CLASSIFICATION_RUN,
    script_settings: str = "",
) -> str:
    paper_name, model_gin, vocabulary_name = MODELS[model]
    return f"""# CLUE {task}, {paper_name}: a cell of the paper's Table 2; settings from {cell}.
# Written by tools/make_clue_gin.py (edit the table there, not this file).
# PRETRAINED is a cmrcx export of the released checkpoint (python -m cmrcx.convert).
# python -m cmrcx.train --gin_file={task}_{model}.gin --gin.MODEL_DIR="'runs/{task}'" \\
#   --gin.DATA_DIR="'DIR'" --gin.PRETRAINED="'EXPORT'"
include '{run_file}'
include 'models/{model_gin}.gin'
include 'partitioning/data.gin'

RunConfig.task = "{task}"
RunConfig.vocabulary_name = "{vocabulary_name}"
RunConfig.require_pretrained = True
# {cell}: batch {batch}, max length {length}, {epochs} epochs, learning rate {lr}.
RunConfig.batch_size = {batch}
RunConfig.max_length = {length}
RunConfig.num_epochs = {float(epochs)}
RunConfig.learning_rate = {lr}
{script_settings}"""


def generated_files() -> dict[pathlib.Path, str]:
    files = {}
    for dataset, rows in TABLE_7.items():
        covered = [m for models, *_ in rows for m in models]
        assert sorted(covered) == sorted(MODELS), f"{dataset}: Table 7 rows cover {covered}"
        run_file = MRC_RUN if dataset in MRC_SCRIPT_SETTINGS else CLASSIFICATION_RUN
        settings = MRC_SCRIPT_SETTINGS.get(dataset, "")
        for models, batch, length, epochs, lr, cell in rows:
            for model in models:
                for task in TASKS[dataset]:
                    text = gin_text(
                        task, model, batch, length, epochs, lr, cell, run_file, settings
                    )
                    files[GIN_DIR / f"{task}_{model}.gin"] = text
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generated_files().items():
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"out of date (run tools/make_clue_gin.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
