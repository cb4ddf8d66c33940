"""The library of `python -m cmrcx.inspect`: the first preprocessed examples of a run's
SeqIO task, as JSON data or a readable view (the entry point's docstring describes both).

No gin: the run comes built. seqio, TensorFlow and the vocabularies are imported inside
the functions that need them, so TensorFlow loads after `launch.prepare_process()`
(quiet, off accelerators) as in every entry point.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.lot import understanding
from cmrcx.common import errors, tf_iterators

# --- Which SeqIO task or mixture ------------------------------------------------------


def run_names(run, run_task) -> list[str]:
    """The names inspect accepts for this run: its task, SeqIO tasks and their mixtures."""
    import seqio  # TensorFlow: after launch.prepare_process()

    tasks = [run_task.train_task, run_task.score_task]
    mixtures = [
        name
        for name in seqio.MixtureRegistry.names()
        if {t.name for t in seqio.get_mixture_or_task(name).tasks} & set(tasks)
    ]
    return list(dict.fromkeys([run.task, *tasks, *sorted(mixtures)]))


def resolve_name(name: str, scoring: bool, run, run_task) -> str:
    """TASK_OR_MIXTURE (or the task's paper name, "ClozeT") -> the SeqIO name to read;
    ConfigError listing the run's names."""
    if name == run.task or task_names.find(name) == run.task:
        return run_task.score_task if scoring else run_task.train_task
    known = run_names(run, run_task)
    if name not in known:
        raise errors.ConfigError(
            f"no task or mixture {name!r} in this run (RunConfig.task={run.task!r}); "
            f"use one of {', '.join(known)}"
        )
    if scoring:
        raise errors.ConfigError(f"--scoring goes with the run's task name {run.task!r}")
    return name


# --- Decoding ------------------------------------------------------------------------


def token_text(vocabulary, ids: Sequence[int]) -> str:
    """ids -> what a reader should see: the vocabulary's input layout's view
    (`cmrcx.vocab.layouts` `Layout.readable`: WordPiece tokens joined by spaces, so the
    framing, blank markers and word pieces stay visible), else the decode."""
    from cmrcx.vocab import layouts  # TensorFlow: see run_names

    layout = layouts.of_vocabulary(vocabulary)
    if layout is None:
        return vocabulary.decode(list(ids))
    return layout.readable(vocabulary, ids)


def mask_lengths(example: Mapping[str, np.ndarray]) -> dict[str, int]:
    """{feature: length} of the rank-1 features a `*_mask` feature covers (to its last 1).

    `<key>_mask` covers `<key>` and itself (LongLM's `inputs_mask`, `targets_mask`); a mask
    named after no feature (BERT's `input_mask`) covers every feature of its width
    (`input_ids`, `token_type_ids`) that has no mask of its own.
    """

    def length(mask: np.ndarray) -> int:
        return int(np.flatnonzero(mask)[-1]) + 1 if mask.any() else 0

    masks = {
        name: value
        for name, value in example.items()
        if name.endswith("_mask") and np.ndim(value) == 1
    }
    same_width = {
        width: [k for k, v in example.items() if np.ndim(v) == 1 and np.size(v) == width]
        for width in {mask.size for mask in masks.values()}
    }
    lengths = {}
    for name, mask in masks.items():
        key = name[: -len("_mask")]
        covered = [key] if key in example else same_width[mask.size]
        for feature in (*covered, name):
            if f"{feature}_mask" in masks and f"{feature}_mask" != name:
                continue  # it has a mask of its own
            lengths.setdefault(feature, length(mask))
    return lengths


def _json_value(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def example_json(
    example: Mapping[str, np.ndarray], vocabularies: Mapping[str, object], trim: bool = True
) -> dict:
    """One numpy example -> JSON data: lists, str, `<name>_text` after each token feature.

    {"input_ids": [2, 7, 3, 0], "input_mask": [1, 1, 1, 0], "context_id": b"D1"} ->
    {"input_ids": [2, 7, 3], "input_ids_text": "[CLS] 他 [SEP]", "input_mask": [1, 1, 1],
     "context_id": "D1"}
    """
    lengths = mask_lengths(example) if trim else {}
    out = {}
    for name, value in example.items():
        value = np.asarray(value) if not isinstance(value, bytes) else value
        if name in lengths and not np.any(value[lengths[name] :]):  # only zeros dropped
            value = value[: lengths[name]]
        out[name] = _json_value(value)
        if name in vocabularies and isinstance(value, np.ndarray) and value.ndim == 1:
            out[f"{name}_text"] = token_text(vocabularies[name], value.tolist())
        elif name in vocabularies and isinstance(value, np.ndarray) and value.ndim == 2:
            # One sequence per choice (ChID, C3): a text per choice, its padding (0) cut.
            out[f"{name}_text"] = [
                token_text(vocabularies[name], row[: _last_nonzero(row) + 1].tolist())
                for row in value
            ]
    if "candidate_positions" in example and vocabularies:
        out["layout"] = pointer_layout(example, next(iter(vocabularies.values())))
    return out


def pointer_layout(example: Mapping[str, np.ndarray], vocabulary) -> str:
    """LOT ClozeT / SenPos: the token layout with the pointer's positions tagged
    (`cmrcx.benchmarks.lot.understanding.describe`): `⟨context⟩`, `⟨k⟩` for candidate k,
    `⟨k*⟩` for the labelled one."""
    from cmrcx.vocab import layouts  # TensorFlow: see run_names

    layout = layouts.of_vocabulary(vocabulary)  # T5's names its sentinels, <sep>, <mask>
    names = {} if layout is None else layout.marker_names(vocabulary)
    return understanding.describe(example, vocabulary, names)


def _last_nonzero(row: np.ndarray) -> int:
    """Index of the last nonzero entry; -1 for an all-zero row (a padded choice)."""
    nonzero = np.flatnonzero(row)
    return int(nonzero[-1]) if nonzero.size else -1


def text_vocabularies(task) -> dict[str, object]:
    """{feature: vocabulary} of the output features that have a real vocabulary."""
    import seqio  # TensorFlow: see run_names

    return {
        name: feature.vocabulary
        for name, feature in task.output_features.items()
        if not isinstance(feature.vocabulary, seqio.PassThroughVocabulary)
    }


# --- The readable view ----------------------------------------------------------------

SHOWN_VALUES = 8  # a list longer than this is cut: `[1, 1, 1, ... 64 values]`


def readable_example(line: Mapping, index: int, where: str) -> str:
    """One example's block, from its `example_json` data: a header, then a line per
    feature; a token feature as its text (one line per choice), `<name>_text` not repeated.

    {"input_ids": [2, 7, 3], "input_ids_text": "[CLS] 他 [SEP]", "label": 1} ->
    example 1 (clue_afqmc_tiny, validation)
      input_ids (3 tokens): [CLS] 他 [SEP]
      label: 1
    """
    lines = [f"example {index} ({where})"]
    for name, value in line.items():
        if name.endswith("_text") and name[: -len("_text")] in line:
            continue  # shown with its feature
        text = line.get(f"{name}_text")
        if isinstance(text, str):
            lines.append(f"  {name} ({_count(value)} tokens): {text}")
        elif isinstance(text, list):
            lines.append(f"  {name} ({len(text)} choices):")
            lines += [f"    {k}: {choice}" for k, choice in enumerate(text)]
        else:
            lines.append(f"  {name}: {_short(value)}")
    return "\n".join(lines)


def _count(value) -> int:
    return len(value) if isinstance(value, list) else 1


def _short(value) -> str:
    """A value as a person reads it: strings bare, lists cut after SHOWN_VALUES values."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) > SHOWN_VALUES:
        head = ", ".join(json.dumps(v, ensure_ascii=False) for v in value[:SHOWN_VALUES])
        return f"[{head}, ... {len(value)} values]"
    return json.dumps(value, ensure_ascii=False)


# --- Reading and printing -------------------------------------------------------------


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Everything written to stdout (Python or C, e.g. data preparation) goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def read_examples(name: str, split: str, n: int) -> tuple[list[dict], dict]:
    """The first `n` numpy examples of a SeqIO task or mixture, and its token vocabularies."""
    import seqio  # TensorFlow: see run_names
    import tensorflow_datasets as tfds

    tfds.disable_progress_bar()  # a split prepared on first use says so on stderr, no bars
    task = seqio.get_mixture_or_task(name)
    # No in-memory cache: taking n examples of a cached dataset makes TF warn.
    dataset = task.get_dataset(
        sequence_length=None, split=split, shuffle=False, use_cached=False, try_in_mem_cache=False
    )
    return list(tf_iterators.numpy_iterator(dataset.take(n))), text_vocabularies(task)


def first_examples(run, name: str, split: str | None, n: int, scoring: bool):
    """(SeqIO name, split, the first `n` numpy examples, their token vocabularies) of
    TASK_OR_MIXTURE `name` of the run (`resolve_name`); split None: the run's eval split."""
    from cmrcx.training.run_tasks import build_run_task  # after gin: TF starts here

    run_task = build_run_task(run)
    name = resolve_name(name, scoring, run, run_task)
    split = split or run.eval_split
    run_task.require_split(split)
    examples, vocabularies = read_examples(name, split, n)
    return name, split, examples, vocabularies


def print_examples(examples, vocabularies, where: str, trim: bool, as_json: bool) -> None:
    """Each example on stdout: a JSON line (`example_json`), or its readable block."""
    for index, example in enumerate(examples, 1):
        line = example_json(example, vocabularies, trim=trim)
        if as_json:
            print(json.dumps(line, ensure_ascii=False), flush=True)
        else:
            print(readable_example(line, index, where), flush=True)
