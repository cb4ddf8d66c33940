"""LOT's four tasks as text-to-text examples for one T5-family model (the `lot` mixture).

Every task becomes (input ids, target ids) for a seq2seq model, so one LongLM can be
fine-tuned on the whole benchmark (no LOT baseline does: the paper fine-tunes one model
per task, section 5.2). Pure Python and NumPy; `cmrcx.tasks.lot.mixture` registers them.

- **ClozeT**: input the candidate pointer's SentencePiece layout, the LongLM authors'
  source (thu-coai/LOT-LongLM baselines/understanding/data/test.source @cea35437)
  ``plot0<extra_id_1>plot1<extra_id_2>LEFT<sep>RIGHT<mask>`` + EOS; target the right
  candidate's sentinel, ``<extra_id_{label+1}>`` + EOS (what the authors' target appends
  to the source).
- **SenPos**: input ``s1<extra_id_1>s2<extra_id_2>...sn<sep>SENTENCE<mask>`` + EOS (the
  pointer's SentencePiece layout: a sentinel at every gap); target the right gap's
  sentinel + EOS.
- **PlotCom, OutGen**: exactly the generation tasks' input and target
  (`cmrcx.benchmarks.lot.generation.source_and_target`), cut as there (the first
  length - 1 ids, then EOS).

The understanding inputs are built by the pointer's layout functions
(`cmrcx.benchmarks.lot.understanding`), ids and all: their story is trimmed around its
markers past max_length, never the candidates, and `<sep>` / `<mask>` are the
vocabulary's pieces or the ids appended after it (`T5Layout.special_ids`), which a text
tokenized as T5Tokenizer would not give. `source_and_target` writes the same examples as
text, for reading and for tests.

**Decoding the understanding tasks: constrained scoring.** The model's log-probability
of each candidate's sentinel as the first target token (the decoder's first step) is
computed (`cmrcx.model_api.seq2seq.Seq2SeqModel`, `num_candidates`), and the prediction
is the candidate whose sentinel scores highest among the candidates the record has
(`constrained_choice`). Greedy decoding then mapping the text back could produce no
candidate at all (another sentinel, a word, EOS) and would need a rule for that case;
scoring the candidates cannot, and costs one decoder step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cmrcx.benchmarks.lot import generation, understanding
from cmrcx.benchmarks.lot.formats import (
    MASK,
    ClozeTRecord,
    OutGenRecord,
    PlotComRecord,
    Record,
    SenPosRecord,
)
from cmrcx.benchmarks.windows import SpecialIds

Tokenize = Callable[[str], Sequence[int]]
SENTINEL = "<extra_id_{}>"
SEP, CONTEXT = "<sep>", "<mask>"  # the pointer layouts' markers (`T5Layout.special_ids`)
UNDERSTANDING = (ClozeTRecord, SenPosRecord)


def candidate_sentinel(index: int) -> str:
    """Candidate ``index`` (0-based)'s sentinel: ``<extra_id_{index + 1}>`` (LongLM numbers
    its sentinels from 1; the authors' ClozeT source and the pointer layouts do).

    >>> candidate_sentinel(0), candidate_sentinel(1)
    ('<extra_id_1>', '<extra_id_2>')
    """
    return SENTINEL.format(index + 1)


def num_candidates(record: Record) -> int:
    """ClozeT 2, SenPos the story's gaps, PlotCom and OutGen 0 (generated)."""
    if isinstance(record, ClozeTRecord):
        return len(record.candidates)
    if isinstance(record, SenPosRecord):
        return record.story.count(MASK)
    return 0


# --- Texts ------------------------------------------------------------------------------


def clozet_source(record: ClozeTRecord) -> str:
    """``plot0<extra_id_1>plot1<extra_id_2>LEFT<sep>RIGHT<mask>`` (the authors' source).

    >>> r = ClozeTRecord(1, "甲乙<mask>丙", ("丁", "戊己"), 1, {})
    >>> clozet_source(r)
    '丁<extra_id_1>戊己<extra_id_2>甲乙<sep>丙<mask>'
    """
    left, right = record.story.split(MASK)
    plots = "".join(plot + candidate_sentinel(k) for k, plot in enumerate(record.candidates))
    return f"{plots}{left}{SEP}{right}{CONTEXT}"


def senpos_source(record: SenPosRecord) -> str:
    """``s1<extra_id_1>s2<extra_id_2>...sn<sep>SENTENCE<mask>``.

    >>> senpos_source(SenPosRecord(1, "甲<mask>乙<mask>丙", "丁", 1, {}))
    '甲<extra_id_1>乙<extra_id_2>丙<sep>丁<mask>'
    """
    first, *rest = record.story.split(MASK)
    gaps = "".join(candidate_sentinel(k) + segment for k, segment in enumerate(rest))
    return f"{first}{gaps}{SEP}{record.sentence}{CONTEXT}"


def understanding_target(record: ClozeTRecord | SenPosRecord) -> str:
    """The right candidate's sentinel ("" without a label: a test file).

    >>> understanding_target(ClozeTRecord(1, "甲<mask>", ("乙", "丙"), 0, {}))
    '<extra_id_1>'
    """
    return "" if record.label is None else candidate_sentinel(record.label)


def source_and_target(record: Record) -> tuple[str, str]:
    """(input text, target text) of any LOT record, EOS not written.

    >>> source_and_target(PlotComRecord(1, "甲。<mask>丙。", "乙。", {}))
    ('甲。<extra_id_1>丙。', '<extra_id_1>乙。')
    """
    if isinstance(record, ClozeTRecord):
        return clozet_source(record), understanding_target(record)
    if isinstance(record, SenPosRecord):
        return senpos_source(record), understanding_target(record)
    return generation.source_and_target(record)


# --- Ids --------------------------------------------------------------------------------


def example(
    record: Record,
    tokenize: Tokenize,
    ids: SpecialIds,
    max_length: int,
    target_length: int,
) -> dict[str, np.ndarray]:
    """The record's model example, int32 and unpadded:
        inputs [<= max_length], targets [<= target_length] (both EOS last);
        candidate_ids [candidates]: the candidates' sentinel ids (ClozeT, SenPos), in
        candidate order; empty for PlotCom and OutGen.

    `tokenize`: a `T5SentencePieceVocabulary`'s `encode` (no EOS); `ids`:
    `cmrcx.vocab.layouts` `T5.special_ids` of it. ClozeT and SenPos: the pointer layout of
    the record (`understanding.clozet_sentencepiece` / `senpos_sentencepiece`: story
    trimmed to fit, DataFormatError naming the line if the rest cannot fit), targets the
    gold sentinel and EOS (EOS alone without a label). PlotCom, OutGen: each text's first
    length - 1 ids and EOS, as `cmrcx.tasks.lot.generation.tokenize_and_trim` (PlotCom's
    around its blank: `generation.cut_source`). Example
    (one id a character, S_k the id of <extra_id_k>): ClozeT story "甲乙<mask>丙", plots
    "丁", "戊己", label 1 ->
        inputs  丁 S1 戊 己 S2 甲 乙 <sep> 丙 <mask> </s>
        targets S2 </s>,  candidate_ids [S1, S2]
    """
    if isinstance(record, UNDERSTANDING):
        kind = "clozet" if isinstance(record, ClozeTRecord) else "senpos"
        layout = understanding.SENTENCEPIECE_LAYOUTS[kind]
        inputs = layout(record, tokenize, ids, max_length)["input_ids"]
        sentinels = [ids.sentinels[k + 1] for k in range(num_candidates(record))]
        gold = [] if record.label is None else [sentinels[record.label]]
        targets = [*gold, ids.eos_id]
        candidates = sentinels
    elif isinstance(record, OutGenRecord | PlotComRecord):
        source, target = generation.source_and_target(record)
        blank = ids.sentinels[1] if isinstance(record, PlotComRecord) else None
        inputs = [*generation.cut_source(tokenize(source), max_length - 1, blank), ids.eos_id]
        targets = [*list(tokenize(target))[: target_length - 1], ids.eos_id]
        candidates = []
    else:
        raise TypeError(f"not a LOT record: {type(record).__name__}")
    return {
        "inputs": np.asarray(inputs, np.int32),
        "targets": np.asarray(targets, np.int32),
        "candidate_ids": np.asarray(candidates, np.int32),
    }


def constrained_choice(log_probs: Sequence[float], candidate_mask: Sequence[int]) -> int:
    """The candidate (0-based) whose sentinel the model scores highest, among the
    candidates present (`candidate_mask` 1; padding slots never win). Ties: the first.

    >>> constrained_choice([-2.0, -0.5, -0.1], [1, 1, 0])
    1
    """
    log_probs = np.asarray(log_probs, np.float64)
    present = np.asarray(candidate_mask) > 0
    if not present.any():
        raise ValueError("constrained_choice: the record has no candidate")
    return int(np.argmax(np.where(present, log_probs, -np.inf)))
