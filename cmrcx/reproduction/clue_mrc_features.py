"""CLUE's CMRC 2018 features and predictions, ported line for line for the recipe side.

Sources, CLUEbenchmark/CLUE baselines/models_pytorch/mrc_pytorch/:
  [PRE] preprocess/cmrc2018_preprocess.py @016c3ba: json2features, _improve_answer_span,
        _check_is_max_context
  [OUT] preprocess/cmrc2018_output.py @2ea9046: write_predictions (version_2_with_negative
        False, as run_mrc.py calls it), get_final_text, _get_best_indexes
  [TOK] tools/official_tokenization.py: BertTokenizer(vocab, do_lower_case=True), which
        transformers' Python BertTokenizer (`clue_classifier.tokenizer_for`) is

This is a second, independent reading of the scripts: cmrcx's own port
(`cmrcx.benchmarks.clue.cmrc2018_windows`) is written as arrays over character spans; this
one keeps the scripts' lists and dicts, so the comparison of the two catches a slip in
either. A record the script would crash on (an answer it cannot place) raises
DataFormatError naming the file and question.
"""

from __future__ import annotations

import collections
import json
from typing import NamedTuple

import numpy as np

from cmrcx.common.errors import DataFormatError

SPIECE_UNDERLINE = "▁"  # [PRE]
FUHAO = set('。，！？；、：（）－~「《》,」"“”$『』—;()-～‘’')  # [PRE] is_fuhao
WHITESPACE = {" ", "\t", "\r", "\n", "\u202f", SPIECE_UNDERLINE}  # [PRE] is_whitespace
START_SKIP = {"。", "，", "：", ":", ".", ","}  # [PRE] json2features
REPEAT_LIMIT, MAX_QUERY_LENGTH = 3, 64  # [PRE] json2features defaults
N_BEST, MAX_ANSWER_LENGTH = 20, 50  # [RUN] run_mrc.py --n_best, --max_ans_length


def _is_chinese_char(cp: int) -> bool:  # [PRE] json2features._is_chinese_char
    return any(a <= cp <= b for a, b in (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))  # fmt: skip


def _tokenize_chinese_chars(text: str) -> str:
    """[PRE] _tokenize_chinese_chars: "▁" around every CJK character and is_fuhao mark."""
    output: list[str] = []
    for char in text:
        if _is_chinese_char(ord(char)) or char in FUHAO:
            if output and output[-1] != SPIECE_UNDERLINE:
                output.append(SPIECE_UNDERLINE)
            output += [char, SPIECE_UNDERLINE]
        else:
            output.append(char)
    return "".join(output)


def read_examples(path: str, is_training: bool) -> list[dict]:
    """[PRE] json2features "to examples": doc_tokens, qid, question and, training, the
    first answer's doc-token start_position and end_position."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    examples = []
    for article in data:
        for para in article["paragraphs"]:
            context = para["context"]
            doc_tokens: list[str] = []
            char_to_word_offset: list[int] = []
            prev_is_whitespace = True
            for c in _tokenize_chinese_chars(context):
                if c in WHITESPACE:
                    prev_is_whitespace = True
                else:
                    if prev_is_whitespace:
                        doc_tokens.append(c)
                    else:
                        doc_tokens[-1] += c
                    prev_is_whitespace = False
                if c != SPIECE_UNDERLINE:
                    char_to_word_offset.append(len(doc_tokens) - 1)
            for qas in para["qas"]:
                start = end = None
                if is_training:
                    try:
                        start, end = _answer_tokens(context, qas, doc_tokens, char_to_word_offset)
                    except (IndexError, KeyError) as error:
                        raise DataFormatError(
                            f"{path}: question {qas.get('id')!r}: the script cannot place its "
                            f"first answer ({type(error).__name__}: {error})"
                        ) from None
                examples.append({"doc_tokens": doc_tokens, "orig_answer_text": context,
                                 "qid": qas["id"], "question": qas["question"],
                                 "start_position": start, "end_position": end})  # fmt: skip
    return examples


def _answer_tokens(context, qas, doc_tokens, char_to_word_offset) -> tuple[int, int]:
    """[PRE] the training positions: the first answer's start moved left up to three
    characters until the text matches, past whitespace, onto doc tokens; a start on a
    START_SKIP token moves one token right."""
    ans_text = qas["answers"][0]["text"]
    start_position = qas["answers"][0]["answer_start"]
    end_position = start_position + len(ans_text) - 1
    count_i = 0
    while context[start_position : end_position + 1] != ans_text and count_i < REPEAT_LIMIT:
        start_position -= 1
        end_position -= 1
        count_i += 1
    while context[start_position] in (" ", "\t", "\r", "\n"):
        start_position += 1
    start_final = char_to_word_offset[start_position]
    end_final = char_to_word_offset[end_position]
    if doc_tokens[start_final] in START_SKIP:
        start_final += 1
    return start_final, end_final


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """[PRE] _improve_answer_span (json2features passes the context as the answer text)."""
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start : new_end + 1]) == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def _check_is_max_context(doc_spans, cur_span_index: int, position: int) -> bool:
    """[PRE] _check_is_max_context."""
    best_score, best_span_index = None, None
    for span_index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_span_index = score, span_index
    return cur_span_index == best_span_index


def _doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> list[tuple]:
    """[PRE] the sliding windows: (start, length)."""
    spans, start_offset = [], 0
    while start_offset < num_tokens:
        length = min(num_tokens - start_offset, max_tokens_for_doc)
        spans.append((start_offset, length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return spans


class MrcFeatures(NamedTuple):
    """[PRE] features: the arrays run_mrc.py makes tensors of (int64 [windows,
    max_seq_length]; start/end_position [windows], 0 when not training), and each
    window's dict (example_index, tokens, token_to_orig_map, token_is_max_context)."""

    examples: list[dict]
    windows: list[dict]
    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    start_position: np.ndarray
    end_position: np.ndarray


def json2features(
    path: str, tokenizer, is_training: bool, max_seq_length: int, doc_stride: int,
    max_query_length: int = MAX_QUERY_LENGTH,
) -> MrcFeatures:  # fmt: skip
    """[PRE] json2features: every window of every question of the file."""
    examples = read_examples(path, is_training)
    windows, rows = [], []
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example["question"])[:max_query_length]
        tok_to_orig_index, orig_to_tok_index, all_doc_tokens = [], [], []
        for i, token in enumerate(example["doc_tokens"]):
            orig_to_tok_index.append(len(all_doc_tokens))
            for sub_token in tokenizer.tokenize(token):
                tok_to_orig_index.append(i)
                all_doc_tokens.append(sub_token)
        if is_training:
            tok_start = orig_to_tok_index[example["start_position"]]
            if example["end_position"] < len(example["doc_tokens"]) - 1:
                tok_end = orig_to_tok_index[example["end_position"] + 1] - 1
            else:
                tok_end = len(all_doc_tokens) - 1
            tok_start, tok_end = _improve_answer_span(
                all_doc_tokens, tok_start, tok_end, tokenizer, example["orig_answer_text"]
            )
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = _doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        for doc_span_index, (span_start, span_length) in enumerate(doc_spans):
            tokens = ["[CLS]", *query_tokens, "[SEP]"]
            segment_ids = [0] * len(tokens)
            token_to_orig_map, token_is_max_context = {}, {}
            for i in range(span_length):
                split_token_index = span_start + i
                token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
                token_is_max_context[len(tokens)] = _check_is_max_context(
                    doc_spans, doc_span_index, split_token_index
                )
                tokens.append(all_doc_tokens[split_token_index])
                segment_ids.append(1)
            tokens.append("[SEP]")
            segment_ids.append(1)
            input_ids = tokenizer.convert_tokens_to_ids(tokens)
            padding = max_seq_length - len(input_ids)
            start_position = end_position = 0
            if is_training:  # a window without the whole answer: 0, 0 ([CLS])
                doc_end = span_start + span_length - 1
                if tok_start >= span_start and tok_end <= doc_end:
                    doc_offset = len(query_tokens) + 2
                    start_position = tok_start - span_start + doc_offset
                    end_position = tok_end - span_start + doc_offset
            windows.append({"example_index": example_index, "tokens": tokens,
                            "token_to_orig_map": token_to_orig_map,
                            "token_is_max_context": token_is_max_context})  # fmt: skip
            rows.append((input_ids + [0] * padding, [1] * len(input_ids) + [0] * padding,
                         segment_ids + [0] * padding, start_position, end_position))  # fmt: skip
    if not rows:
        raise DataFormatError(f"{path}: no questions")
    arrays = (np.array(column, np.int64) for column in zip(*rows, strict=True))
    return MrcFeatures(examples, windows, *arrays)


def _get_best_indexes(logits, n_best_size: int) -> list[int]:
    """[OUT] _get_best_indexes: positions of the n largest, ties in position order."""
    ranked = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [index for index, _ in ranked[:n_best_size]]


def get_final_text(pred_text: str, orig_text: str, basic_tokenizer) -> str:
    """[OUT] get_final_text: the predicted pieces projected back onto orig_text (the
    whole of it when they cannot be aligned)."""

    def strip_spaces(text):
        kept = [(i, c) for i, c in enumerate(text) if c != " "]
        return "".join(c for _, c in kept), dict(enumerate(i for i, _ in kept))

    tok_text = "".join(basic_tokenizer.tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return orig_text
    end_position = start_position + len(pred_text) - 1
    orig_ns_text, orig_ns_to_s_map = strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return orig_text
    tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}
    ns_start = tok_s_to_ns_map.get(start_position)
    ns_end = tok_s_to_ns_map.get(end_position)
    if ns_start not in orig_ns_to_s_map or ns_end not in orig_ns_to_s_map:
        return orig_text
    return orig_text[orig_ns_to_s_map[ns_start] : orig_ns_to_s_map[ns_end] + 1]


def write_predictions(
    features: MrcFeatures, start_logits, end_logits, basic_tokenizer,
    n_best_size: int = N_BEST, max_answer_length: int = MAX_ANSWER_LENGTH,
) -> dict[str, str]:  # fmt: skip
    """[OUT] write_predictions: {qid: best text}. start_logits, end_logits: float
    [windows, max_seq_length], one row per window of `features`."""
    by_example = collections.defaultdict(list)
    for index, window in enumerate(features.windows):
        by_example[window["example_index"]].append(index)
    predictions = {}
    for example_index, example in enumerate(features.examples):
        prelim = []
        for row in by_example[example_index]:
            window, starts, ends = features.windows[row], start_logits[row], end_logits[row]
            for start in _get_best_indexes(list(starts), n_best_size):
                for end in _get_best_indexes(list(ends), n_best_size):
                    if start >= len(window["tokens"]) or end >= len(window["tokens"]):
                        continue
                    if start not in window["token_to_orig_map"]:
                        continue
                    if end not in window["token_to_orig_map"]:
                        continue
                    if not window["token_is_max_context"].get(start, False):
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    prelim.append((row, start, end, float(starts[start]) + float(ends[end])))
        prelim.sort(key=lambda p: p[3], reverse=True)
        seen, nbest = set(), []
        for row, start, end, _ in prelim:
            if len(nbest) >= n_best_size:
                break
            window = features.windows[row]
            tok_text = "".join(window["tokens"][start : end + 1])
            tok_text = tok_text.replace(" ##", "").replace("##", "")
            tok_text = " ".join(tok_text.strip().split())
            orig_start = window["token_to_orig_map"][start]
            orig_end = window["token_to_orig_map"][end]
            orig_text = "".join(example["doc_tokens"][orig_start : orig_end + 1])
            final_text = get_final_text(tok_text, orig_text, basic_tokenizer)
            if final_text in seen:
                continue
            seen.add(final_text)
            nbest.append(final_text)
        predictions[example["qid"]] = nbest[0] if nbest else "empty"
    return predictions
