"""Writes gin_configs/clue_<task>_<model>.gin: CLUE's Table 7, one file per (task, model).

    python tools/make_clue_gin.py            # (re)write the files
    python tools/make_clue_gin.py --check    # exit 1 if a file differs (tests run this)

The table below is Table 7 of Xu et al., COLING 2020 ("Parameters for fine-tuning"),
cell by cell; each generated file cites its cell. CMNLI is not in Table 7: its values
are CLUE's run script (baselines/models_pytorch/classifier_pytorch/
run_classifier_cmnli.sh @0059793: batch 16, length 128, 2 epochs, 3e-5). OCNLI has no
cell for BERT-wwm-ext and RoBERTa-large: they take the BERT-base cell, as the run script
(run_classifier_ocnli.sh) does for every model.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

GIN_DIR = pathlib.Path(__file__).resolve().parent.parent / "gin_configs"

# model name in file names -> (Table 2/7 name, models/*.gin, vocabulary_name)
MODELS = {
    "bert": ("BERT-base", "bert_base", "bert_chinese"),
    "bert_wwm_ext": ("BERT-wwm-ext-base", "bert_base", "bert_chinese"),
    "ernie": ("ERNIE-base", "ernie_base", "ernie"),
    "roberta_large": ("RoBERTa-large", "roberta_large", "bert_chinese"),
    "roberta_wwm_ext": ("RoBERTa-wwm-ext-base", "bert_base", "bert_chinese"),
    "roberta_wwm_ext_large": ("RoBERTa-wwm-ext-large", "bert_large", "bert_chinese"),
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
}  # fmt: skip


def gin_text(task: str, model: str, batch: int, length: int, epochs: int, lr: str, cell: str):
    paper_name, model_gin, vocabulary_name = MODELS[model]
    return f"""# CLUE {task}, {paper_name}: a cell of the paper's Table 2; settings from {cell}.
# Written by tools/make_clue_gin.py (edit the table there, not this file).
# PRETRAINED is a cmrcx export of the released checkpoint (python -m cmrcx.convert).
# python -m cmrcx.train --gin_file={task}_{model}.gin --gin.MODEL_DIR="'runs/{task}'" \\
#   --gin.DATA_DIR="'DIR'" --gin.PRETRAINED="'EXPORT'"
include 'runs/clue_finetune.gin'
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
"""


def generated_files() -> dict[pathlib.Path, str]:
    files = {}
    for dataset, rows in TABLE_7.items():
        covered = [m for models, *_ in rows for m in models]
        assert sorted(covered) == sorted(MODELS), f"{dataset}: Table 7 rows cover {covered}"
        for models, batch, length, epochs, lr, cell in rows:
            for model in models:
                for task in TASKS[dataset]:
                    text = gin_text(task, model, batch, length, epochs, lr, cell)
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
