"""The CLUE classification tasks as data: one `ClueTask` row per versioned task name.

Sources (cited below by their tag; a commit is the stored version that was read):

  [TF]     CLUEbenchmark/CLUE baselines/models/classifier_utils.py @016c3ba: the TF
           baselines' processors (fields, label lists, CSL/WSC input, CMNLI "-" skip).
  [PT]     CLUEbenchmark/CLUE baselines/models_pytorch/classifier_pytorch/processors/clue.py
           @0059793: the PyTorch baselines' processors (same fields and label lists).
  [RUN]    CLUEbenchmark/CLUE baselines/models/bert/run_classifier.py @29614fc: test
           predictions written as ``task_name + "_predict.json"``, one ``{"id", "label"}``
           object per line, the label as the label-list string.
  [README] CLUEbenchmark/CLUE README.md @21ef108: file formats with example lines,
           ``<task>_public.zip`` downloads, diagnostics "predicted by a CMNLI-trained model,
           submitted in CMNLI's format".
  [SUBMIT] CLUE "任务提交说明" (2021-09-04 update; the index holds its text without a
           repository path): ``<task><version>_predict.json``; tnews and cluewsc2020 changed
           their test sets in CLUE 1.1 (tnews11/tnews10, cluewsc11/cluewsc10); one JSON object
           per line in test.json line order; only "label" is read and compared in order.
  [OCNLI]  CLUEbenchmark/OCNLI README.md @02d55cb ("-" = no majority label, excluded) and
           ocnli/classifier_utils.py @ed7ede2 (the "-" rows are skipped and counted).
  [HF]     huggingface/datasets datasets/clue/clue.py @02bb18c: diagnostics file
           ``diagnostics_test.json`` with premise/hypothesis and an "index" id.
  [PADDLE] PaddlePaddle/PaddleNLP paddlenlp/datasets/clue.py @24b1553 (tnews ``test1.0.json``
           next to the 1.1 ``test.json``; a later version adds cluewsc2020 ``test1.0.json``) and
           PaddleNLP's CLUE dataset tests (first record of each split: test files carry "id";
           CLUEWSC2020 train/dev use "idx" but its test files "id"; CSL test ids start at 2415).
  [3P]     Three independent CLUE 1.1 prediction scripts (a RoFormer ``task_to_outputfile11``
           table, a PaddleNLP script, a ``predict2submit`` shell script; repositories not
           resolved by the index) all name OCNLI's file ``ocnli_50k_predict.json``.
  [PAPER]  Xu et al., COLING 2020: Table 1 (tasks, class counts), Table 2 (accuracy for every
           classification task), Table 7 (max length), Section 7 and Appendix C.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping

# [TF] AFQMCProcessor / CslProcessor.get_labels: ["0", "1"].
BINARY_LABELS = ("0", "1")
# [TF] TnewsProcessor.get_labels: 100..116 without 105 and 111 -> 15 classes ([PAPER] Table 1).
TNEWS_LABELS = tuple(str(100 + i) for i in range(17) if i not in (5, 11))
# [TF] iFLYTEKDataProcessor.get_labels: "0".."118" -> 119 classes ([PAPER] Table 1).
IFLYTEK_LABELS = tuple(str(i) for i in range(119))
# [TF] CMNLIProcessor.get_labels (also used for OCNLI by [OCNLI]'s run_classifier).
NLI_LABELS = ("contradiction", "entailment", "neutral")
# [TF] WSCProcessor.get_labels: ["true", "false"] (this order, not alphabetical).
WSC_LABELS = ("true", "false")

# How the encoder input is built from a record (see `cmrcx.benchmarks.clue.inputs`).
SINGLE, PAIR, CSL_KEYWORDS, WSC_MARKED = "single", "pair", "csl_keywords", "wsc_marked"

_STANDARD_SPLITS = {"train": "train.json", "validation": "dev.json", "test": "test.json"}


@dataclasses.dataclass(frozen=True)
class ClueTask:
    """One row of the CLUE table.

    Attributes:
      name: versioned task name used everywhere in cmrcx, e.g. ``"clue_tnews11"``.
      dataset: CLUE's own lowercase name of the data set, e.g. ``"tnews"``.
      clue_version: ``"1.0"`` / ``"1.1"`` for the tasks whose test set changed in CLUE 1.1
        ([SUBMIT]: tnews, cluewsc2020); None where one test set serves both.
      public_dir: folder (and zip name) of the official download, e.g. ``"tnews_public"``.
      split_files: split name -> file name inside ``public_dir``.
      text_fields: required text fields of every record, in encoder order.
      optional_text_fields: text fields kept when present but never required.
      id_fields: record fields holding the id, first present wins; a record with none
        of them gets its 0-based line index as id.
      label_field: field holding the gold label.
      labels: the label strings in the baselines' ``get_labels()`` order (logit order).
      unlabelled_marker: label value of rows without a majority label, skipped and counted
        when reading a labelled split; None if every label must be in ``labels``.
      input_format: one of SINGLE, PAIR, CSL_KEYWORDS, WSC_MARKED.
      submission_file: the official name of the test-set prediction file.
      metric: the leaderboard metric ([PAPER] Table 2: accuracy for all of these).
      max_length: encoder length in tokens ([PAPER] Table 7; CMNLI from [README]).
      predicted_by: for a set without training data, the task whose model predicts it.
    """

    name: str
    dataset: str
    clue_version: str | None
    public_dir: str
    split_files: Mapping[str, str]
    text_fields: tuple[str, ...]
    optional_text_fields: tuple[str, ...]
    id_fields: tuple[str, ...]
    label_field: str
    labels: tuple[str, ...]
    unlabelled_marker: str | None
    input_format: str
    submission_file: str
    metric: str
    max_length: int
    predicted_by: str | None = None

    @property
    def num_classes(self) -> int:
        """Number of output classes of the classifier head."""
        return len(self.labels)


def _task(name: str, dataset: str, **overrides: object) -> ClueTask:
    """A row with the defaults most CLUE classification tasks share."""
    fields: dict[str, object] = {
        "clue_version": None,
        "public_dir": f"{dataset}_public",
        "split_files": _STANDARD_SPLITS,
        "optional_text_fields": (),
        "id_fields": ("id",),
        "label_field": "label",
        "unlabelled_marker": None,
        "submission_file": f"{dataset}_predict.json",  # [RUN], [SUBMIT]
        "metric": "accuracy",
        "max_length": 128,
    }
    fields.update(overrides)
    fields["split_files"] = types.MappingProxyType(dict(fields["split_files"]))  # type: ignore[arg-type]
    return ClueTask(name=name, dataset=dataset, **fields)  # type: ignore[arg-type]


_ROWS = (
    # [README] {"sentence1", "sentence2", "label": "0"}; [TF] text_a/text_b = sentence1/2.
    _task(
        "clue_afqmc",
        "afqmc",
        text_fields=("sentence1", "sentence2"),
        labels=BINARY_LABELS,
        input_format=PAIR,
    ),
    # [README]/[PADDLE] {"label", "label_desc", "sentence", "keywords"}; [TF]/[PT] use only
    # "sentence" (keywords are kept, unused). [PADDLE]/[SUBMIT]: 1.0 test is test1.0.json.
    _task(
        "clue_tnews10",
        "tnews",
        clue_version="1.0",
        text_fields=("sentence",),
        optional_text_fields=("keywords",),
        labels=TNEWS_LABELS,
        input_format=SINGLE,
        split_files={**_STANDARD_SPLITS, "test": "test1.0.json"},
        submission_file="tnews10_predict.json",
    ),
    _task(
        "clue_tnews11",
        "tnews",
        clue_version="1.1",
        text_fields=("sentence",),
        optional_text_fields=("keywords",),
        labels=TNEWS_LABELS,
        input_format=SINGLE,
        submission_file="tnews11_predict.json",
    ),
    # [README] {"label", "label_des", "sentence"}; sentences hold U+2028 (split on "\n" only).
    _task(
        "clue_iflytek",
        "iflytek",
        text_fields=("sentence",),
        labels=IFLYTEK_LABELS,
        input_format=SINGLE,
    ),
    # [OCNLI] train.50k.json, dev.json, test.json; label "-" = no majority, excluded.
    # Submission name from [3P] ([SUBMIT]'s rule alone would give ocnli_predict.json).
    _task(
        "clue_ocnli",
        "ocnli",
        text_fields=("sentence1", "sentence2"),
        labels=NLI_LABELS,
        unlabelled_marker="-",
        input_format=PAIR,
        split_files={**_STANDARD_SPLITS, "train": "train.50k.json"},
        submission_file="ocnli_50k_predict.json",
    ),
    # [README] {"sentence1", "sentence2", "label"}; [TF] CMNLIProcessor skips label "-".
    # ([PT] reads an older "gold_label" key; the current files and [TF] use "label".)
    _task(
        "clue_cmnli",
        "cmnli",
        text_fields=("sentence1", "sentence2"),
        labels=NLI_LABELS,
        unlabelled_marker="-",
        input_format=PAIR,
    ),
    # [README] {"target": {span1_index, span1_text, span2_index, span2_text}, "idx", "label",
    # "text"}; [PADDLE] test files use "id". [TF] WSCProcessor marks the spans in "text".
    _task(
        "clue_cluewsc10",
        "cluewsc2020",
        clue_version="1.0",
        text_fields=("text", "target"),
        id_fields=("id", "idx"),
        labels=WSC_LABELS,
        input_format=WSC_MARKED,
        split_files={**_STANDARD_SPLITS, "test": "test1.0.json"},
        submission_file="cluewsc10_predict.json",
    ),
    _task(
        "clue_cluewsc11",
        "cluewsc2020",
        clue_version="1.1",
        text_fields=("text", "target"),
        id_fields=("id", "idx"),
        labels=WSC_LABELS,
        input_format=WSC_MARKED,
        submission_file="cluewsc11_predict.json",
    ),
    # [README] {"id", "abst", "keyword": [...], "label": "1"}; [TF] text_a = " ".join(keyword),
    # text_b = abst. [PAPER] Table 7: max length 256.
    _task(
        "clue_csl",
        "csl",
        text_fields=("keyword", "abst"),
        labels=BINARY_LABELS,
        input_format=CSL_KEYWORDS,
        max_length=256,
    ),
    # [HF] diagnostics_test.json {"index", "premise", "hypothesis", "label"}; [README]: predict
    # with the CMNLI-trained model, submit in CMNLI's format. ([PAPER] Section 7 and [SUBMIT]
    # name OCNLI instead; both use NLI_LABELS, so only `predicted_by` would change.)
    # The submission name follows [SUBMIT]'s <task>_predict.json rule: no source names it.
    _task(
        "clue_diagnostics",
        "diagnostics",
        public_dir="clue_diagnostics_public",
        split_files={"test": "diagnostics_test.json"},
        text_fields=("premise", "hypothesis"),
        id_fields=("index",),
        labels=NLI_LABELS,
        input_format=PAIR,
        predicted_by="clue_cmnli",
    ),
)

# Versioned task name -> row, in the order of the leaderboard's classification table.
TASKS: Mapping[str, ClueTask] = types.MappingProxyType({row.name: row for row in _ROWS})


def get_task(name: str) -> ClueTask:
    """The row for ``name`` (e.g. ``"clue_afqmc"``); KeyError listing the known names."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown CLUE task {name!r}; known: {', '.join(TASKS)}") from None
