"""LOT's understanding tasks (ClozeT, SenPos) as the candidate pointer's token layouts.

The paper's method (Guan et al. 2022, section 5.2) dots each candidate's state with a
context state: ClozeT, the state at the end of each candidate against the one "at the
position of the removed sentence"; SenPos, the state at each candidate position against
the one at the end of the removed sentence. The paper gives no token layout: the ones
below are ours, one per (task, input layout: `cmrcx.vocab.layouts` `Layout.pointer`
picks them), each a function
    layout(record, tokenize, ids, max_length) -> example
with `tokenize` text -> ids (a vocabulary's `encode`: no [CLS]/[SEP]/EOS), `ids` the
vocabulary's special ids (`cmrcx.benchmarks.windows.SpecialIds`, built by the layout's
`special_ids`: WordPiece's cls_id, sep_id, blank_id [unused1] and end_id [unused2],
SentencePiece's sep_id <sep>, mask_id <mask>, eos_id and sentinels) and the
example a dict of int32 NumPy arrays (unpadded, see `pad_example`):
    input_ids, token_type_ids, input_mask [length]; candidate_positions, candidate_mask
    [candidates]; context_position, label [] (label -1: the record has none)
in the keys of `cmrcx.model_api.candidate_pointer.CandidatePointerModel`. Positions
index input_ids. The story's text is tokenized piece by piece between its blanks.

WordPiece (BERT, RoBERTa, the 3-layer Transformer; a bidirectional encoder sees every
token from every position): `[unused1]` marks a place in the story where a sentence is
missing (ClozeT) or may go (SenPos), `[unused2]` ends a sentence outside the story.
WordPiece, causal (GPT-2, a decoder-only model over BERT's vocab.txt: the state of token
t has read tokens <= t only): the same markers, laid out as the SentencePiece ones, the
context token last (`clozet_wordpiece_causal`); SenPos's WordPiece layout already ends
with its context and serves both.
SentencePiece (LongLM, mT5; the pointer reads the decoder's states, causal: the state of
token t has read tokens <= t, and the whole input through cross-attention): candidates
are marked by sentinels, the context token comes last, after everything, as the LongLM
authors' ClozeT code has it (`clozet_sentencepiece` is their source format).

Never cut: the candidates, the removed sentence and every marker. Past max_length the
story's text is trimmed around its markers (`trim_story`), and a record whose fixed part
alone does not fit is a DataFormatError naming its line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from cmrcx.benchmarks.lot.formats import MASK, ClozeTRecord, SenPosRecord
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.common.errors import DataFormatError

Tokenize = Callable[[str], Sequence[int]]
# The WordPiece layouts' markers (`BertLayout.special_ids`: blank_id, end_id), named in
# the error when a vocabulary lacks one.
BLANK_TOKEN, END_TOKEN = "[unused1]", "[unused2]"
# --- Layouts -------------------------------------------------------------------------


def clozet_wordpiece(
    record: ClozeTRecord, tokenize: Tokenize, ids: SpecialIds, max_length: int = 512
) -> dict[str, np.ndarray]:
    """`[CLS] LEFT [unused1] RIGHT [SEP] plot0 [unused2] plot1 [unused2] [SEP]`.

    Context: the `[unused1]` where the sentence was removed; candidate k: the `[unused2]`
    ending plot k. Token types 0 up to the first [SEP], 1 after (BERT's pairs). Example
    (one character a token): story "甲乙<mask>丙", plots "丁", "戊己", label 1 ->
        [CLS] 甲 乙 [unused1] 丙 [SEP] 丁 [unused2] 戊 己 [unused2] [SEP]
        candidate_positions [7, 10], context_position 3, label 1
    """
    left, right = _story_parts(record, tokenize, blanks=1)
    plots = [list(tokenize(plot)) for plot in record.candidates]
    fixed = 4 + sum(len(plot) + 1 for plot in plots)
    left, right = trim_story([left, right], _budget(record, max_length, fixed))
    out = _Builder()
    out.add([ids.cls_id, *left])
    context = out.mark(ids.blank_id, name=BLANK_TOKEN)
    out.add([*right, ids.sep_id])
    candidates = []
    for plot in plots:
        out.add(plot, 1)
        candidates.append(out.mark(ids.end_id, 1, name=END_TOKEN))
    out.add([ids.sep_id], 1)
    return out.example(candidates, context, record.label)


def senpos_wordpiece(
    record: SenPosRecord, tokenize: Tokenize, ids: SpecialIds, max_length: int = 512
) -> dict[str, np.ndarray]:
    """`[CLS] s1 [unused1] s2 [unused1] ... sn [SEP] sentence [unused2] [SEP]`.

    Candidate k: the k-th `[unused1]` (the k-th `<mask>` of the story); context: the
    `[unused2]` ending the removed sentence. Token types 0 up to the first [SEP], 1
    after (BERT's pairs). Example: story "甲<mask>乙<mask>丙", sentence "丁", label 1 ->
        [CLS] 甲 [unused1] 乙 [unused1] 丙 [SEP] 丁 [unused2] [SEP]
        candidate_positions [2, 4], context_position 8, label 1
    """
    segments = _story_parts(record, tokenize)
    sentence = list(tokenize(record.sentence))
    fixed = 4 + (len(segments) - 1) + len(sentence)
    segments = trim_story(segments, _budget(record, max_length, fixed))
    out = _Builder()
    out.add([ids.cls_id, *segments[0]])
    candidates = []
    for segment in segments[1:]:
        candidates.append(out.mark(ids.blank_id, name=BLANK_TOKEN))
        out.add(segment)
    out.add([ids.sep_id])
    out.add(sentence, 1)
    context = out.mark(ids.end_id, 1, name=END_TOKEN)
    out.add([ids.sep_id], 1)
    return out.example(candidates, context, record.label)


def clozet_wordpiece_causal(
    record: ClozeTRecord, tokenize: Tokenize, ids: SpecialIds, max_length: int = 512
) -> dict[str, np.ndarray]:
    """`[CLS] plot0 [unused2] plot1 [unused2] LEFT [unused1] RIGHT [SEP]`, for a causal
    decoder (GPT-2): `clozet_sentencepiece`'s order with WordPiece markers.

    Candidate k: the `[unused2]` ending plot k; context: the final `[SEP]`, whose state has
    read both plots and the whole story (`[unused1]` marks the removed sentence's place;
    a state at `[unused1]` would have read only LEFT). Token types all 0 (GPT-2 has none).
    Example: story "甲乙<mask>丙", plots "丁", "戊己", label 1 ->
        [CLS] 丁 [unused2] 戊 己 [unused2] 甲 乙 [unused1] 丙 [SEP]
        candidate_positions [2, 5], context_position 10, label 1
    """
    left, right = _story_parts(record, tokenize, blanks=1)
    plots = [list(tokenize(plot)) for plot in record.candidates]
    fixed = 3 + sum(len(plot) + 1 for plot in plots)
    left, right = trim_story([left, right], _budget(record, max_length, fixed))
    out = _Builder()
    out.add([ids.cls_id])
    candidates = []
    for plot in plots:
        out.add(plot)
        candidates.append(out.mark(ids.end_id, name=END_TOKEN))
    out.add(left)
    out.mark(ids.blank_id, name=BLANK_TOKEN)
    out.add(right)
    context = out.mark(ids.sep_id)
    return out.example(candidates, context, record.label)


def clozet_sentencepiece(
    record: ClozeTRecord, tokenize: Tokenize, ids: SpecialIds, max_length: int = 512
) -> dict[str, np.ndarray]:
    """`plot0 <extra_id_1> plot1 <extra_id_2> LEFT <sep> RIGHT <mask> </s>`: the LongLM
    authors' source (LOT-LongLM baselines/understanding/data/test.source) plus EOS.

    Candidate k: the sentinel `<extra_id_{k+1}>` ending plot k; context: the final
    `<mask>`, whose decoder state has read the candidates and the whole story (`<sep>`
    marks the removed sentence's place). A state at `<sep>` itself, the paper's words,
    would have read only LEFT in the causal decoder. Example: story "甲乙<mask>丙",
    plots "丁", "戊己", label 1 ->
        丁 <extra_id_1> 戊 己 <extra_id_2> 甲 乙 <sep> 丙 <mask> </s>
        candidate_positions [1, 4], context_position 9, label 1
    """
    left, right = _story_parts(record, tokenize, blanks=1)
    plots = [list(tokenize(plot)) for plot in record.candidates]
    fixed = 3 + sum(len(plot) + 1 for plot in plots)
    left, right = trim_story([left, right], _budget(record, max_length, fixed))
    out = _Builder()
    candidates = []
    for k, plot in enumerate(plots):
        out.add(plot)
        candidates.append(out.mark(ids.sentinels[k + 1]))
    out.add([*left, ids.sep_id, *right])
    context = out.mark(ids.mask_id)
    out.add([ids.eos_id])
    return out.example(candidates, context, record.label)


def senpos_sentencepiece(
    record: SenPosRecord, tokenize: Tokenize, ids: SpecialIds, max_length: int = 512
) -> dict[str, np.ndarray]:
    """`s1 <extra_id_1> s2 <extra_id_2> ... sn <sep> sentence <mask> </s>`.

    Candidate k: the sentinel `<extra_id_{k+1}>` at the k-th gap (numbered from 1 as in
    LongLM's pretraining examples and the authors' ClozeT); context: the `<mask>` ending
    the removed sentence, last, so its decoder state has read every gap and the
    sentence. The trade-off of a causal decoder: a gap's state has read only the story
    before it (the rest through cross-attention), where the sentence first would let
    each gap read the sentence but leave the context state blind to the story. At most
    len(sentinels) - 1 gaps. Example: story "甲<mask>乙<mask>丙", sentence "丁", label 1 ->
        甲 <extra_id_1> 乙 <extra_id_2> 丙 <sep> 丁 <mask> </s>
        candidate_positions [1, 3], context_position 7, label 1
    """
    segments = _story_parts(record, tokenize)
    if len(segments) > len(ids.sentinels):
        raise DataFormatError(
            f"record at line {record.line}, field 'story': {len(segments) - 1} candidate "
            f"positions, more than the {len(ids.sentinels) - 1} sentinels <extra_id_1..>"
        )
    sentence = list(tokenize(record.sentence))
    fixed = 3 + (len(segments) - 1) + len(sentence)
    segments = trim_story(segments, _budget(record, max_length, fixed))
    out = _Builder()
    out.add(segments[0])
    candidates = []
    for k, segment in enumerate(segments[1:]):
        candidates.append(out.mark(ids.sentinels[k + 1]))
        out.add(segment)
    out.add([ids.sep_id, *sentence])
    context = out.mark(ids.mask_id)
    out.add([ids.eos_id])
    return out.example(candidates, context, record.label)


def clozet_longlm_authors(
    record: ClozeTRecord, tokenize: Tokenize, ids: SpecialIds, max_length: int = 512
) -> dict[str, np.ndarray]:
    """The LongLM authors' ClozeT example (LOT-LongLM baselines/understanding, `utils.py`
    Seq2SeqDataset and finetune.py:157-194) for `LongLMAuthorsClozeModel`:
        inputs  = `plot0 <extra_id_1> plot1 <extra_id_2> LEFT <sep> RIGHT <mask> </s>`
        targets = the same + the gold sentinel (`<extra_id_{label+1}>`) before `</s>`
    and candidate_positions / context_position in the decoder input shift_right(targets)
    (one more than in targets): the positions whose input is a sentinel / `<mask>`.
    Keys inputs, inputs_mask, targets, targets_mask, candidate_positions,
    candidate_mask, context_position, label. No label: targets = inputs (the positions
    scored come before the gold). Example as `clozet_sentencepiece`'s:
        targets 丁 <extra_id_1> 戊 己 <extra_id_2> 甲 乙 <sep> 丙 <mask> <extra_id_2> </s>
        candidate_positions [2, 5], context_position 10
    Their tokenizer truncates source and target at 512 tokens, cutting `<mask>` (then
    their label is 0 and the example is lost); here the story is trimmed instead
    (`trim_story`), the targets to max_length, the inputs to max_length - 1.
    """
    source = clozet_sentencepiece(record, tokenize, ids, max_length - 1)
    inputs = source["input_ids"]
    targets = inputs
    if record.label is not None:
        targets = np.concatenate([inputs[:-1], [ids.sentinels[record.label + 1], ids.eos_id]])
    targets = targets.astype(np.int32)
    return {
        "inputs": inputs,
        "inputs_mask": np.ones_like(inputs),
        "targets": targets,
        "targets_mask": np.ones_like(targets),
        "candidate_positions": source["candidate_positions"] + 1,
        "candidate_mask": source["candidate_mask"],
        "context_position": source["context_position"] + 1,
        "label": source["label"],
    }


# The run tasks of this problem type -> the LOT data task their records come from.
# "lot_clozet_longlm_authors": the LongLM authors' ClozeT script (`clozet_longlm_authors`).
TASKS = {
    "lot_clozet": "clozet",
    "lot_senpos": "senpos",
    "lot_clozet_longlm_authors": "clozet",
}
AUTHORS_TASK = "lot_clozet_longlm_authors"

# A model family's layout of each task is its input layout's `pointer`
# (`cmrcx.vocab.layouts`: "bert" the WordPiece ones, "gpt2" `clozet_wordpiece_causal` and
# `senpos_wordpiece`, whose context is already last, "t5" the SentencePiece ones, which
# T5's decoder states read causally already).
SENTENCEPIECE_LAYOUTS = {"clozet": clozet_sentencepiece, "senpos": senpos_sentencepiece}


# --- Trimming and building -----------------------------------------------------------


def trim_story(segments: list[list[int]], budget: int) -> list[list[int]]:
    """The story's text between its markers cut to `budget` tokens in all, keeping the
    tokens nearest a marker: the first segment loses its start, the last its end, an
    inner one its middle; ties keep the earlier token, so one marker keeps as much left
    as right context. Segments are never dropped, only emptied.

    >>> trim_story([[1, 2, 3], [4, 5, 6]], 3)
    [[2, 3], [4]]
    >>> trim_story([[1, 2], [3, 4, 5, 6, 7], [8, 9]], 6)
    [[1, 2], [3, 4, 7], [8]]
    """
    if sum(map(len, segments)) <= budget:
        return segments
    last = len(segments) - 1
    ranked = []
    for k, segment in enumerate(segments):
        for i in range(len(segment)):
            before = i + 1 if k > 0 else float("inf")  # distance to the marker before
            after = len(segment) - i if k < last else float("inf")  # ... and after
            ranked.append((min(before, after), k, i))
    kept = {(k, i) for _, k, i in sorted(ranked)[:budget]}
    return [[t for i, t in enumerate(s) if (k, i) in kept] for k, s in enumerate(segments)]


def _story_parts(record, tokenize: Tokenize, blanks: int | None = None) -> list[list[int]]:
    """The story's text between its MASKs, tokenized; DataFormatError unless `blanks`
    MASKs (None: at least one)."""
    parts = record.story.split(MASK)
    if (blanks is None and len(parts) < 2) or (blanks is not None and len(parts) != blanks + 1):
        want = "at least one" if blanks is None else f"exactly {blanks}"
        raise DataFormatError(
            f"record at line {record.line}, field 'story': {len(parts) - 1} blanks "
            f"({MASK}), expected {want}"
        )
    return [list(tokenize(part)) for part in parts]


def _budget(record, max_length: int, fixed: int) -> int:
    """Tokens left for the story's text; DataFormatError if the fixed part does not fit."""
    if fixed > max_length:
        raise DataFormatError(
            f"record at line {record.line}: its candidates, removed sentence and markers take "
            f"{fixed} tokens, more than max_length {max_length}; nothing of them may be cut"
        )
    return max_length - fixed


class _Builder:
    """A token sequence under construction, with its token types."""

    def __init__(self):
        self.ids: list[int] = []
        self.types: list[int] = []

    def add(self, ids: Sequence[int], token_type: int = 0) -> None:
        self.ids.extend(ids)
        self.types.extend([token_type] * len(ids))

    def mark(self, token_id: int | None, token_type: int = 0, name: str = "marker") -> int:
        """Appends one marker; returns its position. ValueError naming the token (`name`)
        when the vocabulary lacks it (`SpecialIds` holds None)."""
        if token_id is None:
            raise ValueError(f"the vocabulary has no {name} token, which this layout writes")
        self.add([token_id], token_type)
        return len(self.ids) - 1

    def example(self, candidates: list[int], context: int, label: int | None) -> dict:
        ids = np.asarray(self.ids, np.int32)
        return {
            "input_ids": ids,
            "token_type_ids": np.asarray(self.types, np.int32),
            "input_mask": np.ones_like(ids),
            "candidate_positions": np.asarray(candidates, np.int32),
            "candidate_mask": np.ones([len(candidates)], np.int32),
            "context_position": np.int32(context),
            "label": np.int32(-1 if label is None else label),
        }


# --- Batching and showing --------------------------------------------------------------

CANDIDATE_KEYS = ("candidate_positions", "candidate_mask")


def pad_example(
    example: Mapping[str, np.ndarray], length: int, num_candidates: int
) -> dict[str, np.ndarray]:
    """Token features zero-padded to `length`, candidate features to `num_candidates`
    (masks 0 there); ValueError if one is longer."""
    out = {}
    for key, value in example.items():
        value = np.asarray(value)
        if value.ndim == 1:
            size = num_candidates if key in CANDIDATE_KEYS else length
            if value.size > size:
                raise ValueError(f"{key}: {value.size} entries, more than {size}")
            value = np.pad(value, (0, size - value.size))
        out[key] = value
    return out


def describe(
    example: Mapping[str, np.ndarray], vocabulary, names: Mapping[int, str] | None = None
) -> str:
    """The example's token sequence as text, token by token, each pointer position
    tagged: `⟨context⟩`, `⟨k⟩` for candidate k, `⟨k*⟩` for the labelled one.

    vocabulary: anything with `tokens` (id -> text; WordPiece or SentencePiece
    vocabularies) or such a list; names: texts of ids beyond it (for appended `<sep>` /
    `<mask>`: `cmrcx.vocab.layouts.T5Layout.marker_names`). An authors' example (inputs /
    targets) is shown as its decoder input, `⟨start⟩` + targets[:-1], where its positions
    point.
    `[CLS] 甲 乙 [unused1]⟨context⟩ 丙 [SEP] 丁 [unused2]⟨0⟩ 戊 己 [unused2]⟨1*⟩ [SEP]`
    """
    tokens = getattr(vocabulary, "tokens", vocabulary)
    names = names or {}
    if "input_ids" in example:
        ids, mask = example["input_ids"], example["input_mask"]
        texts = [_token(int(i), tokens, names) for i, m in zip(ids, mask, strict=True) if m]
    else:
        ids, mask = example["targets"], example["targets_mask"]
        real = [int(i) for i, m in zip(ids, mask, strict=True) if m]
        texts = ["⟨start⟩"] + [_token(i, tokens, names) for i in real[:-1]]
    tags = {int(example["context_position"]): "⟨context⟩"}
    label = int(example["label"])
    for k, (position, real) in enumerate(
        zip(example["candidate_positions"], example["candidate_mask"], strict=True)
    ):
        if real:
            tags[int(position)] = f"⟨{k}{'*' if k == label else ''}⟩"
    return " ".join(text + tags.get(position, "") for position, text in enumerate(texts))


def _token(token_id: int, tokens: Sequence[str], names: Mapping[int, str]) -> str:
    if token_id in names:
        return names[token_id]
    return tokens[token_id] if 0 <= token_id < len(tokens) else f"<{token_id}>"
