"""The library of `python -m cmrcx.generate`: T5 and GPT-2 generation from a cmrcx export.

Reads the export and its vocabulary, the input file (a line per input, or a LOT OutGen /
PlotCom jsonl file), decodes in padded batches with `cmrcx.models.decoding` and writes
the outputs (the entry point's docstring gives the formats). No gin: `GenerationConfig`
is a plain dataclass, which `cmrcx.cli.generation` registers with gin. TensorFlow (the
vocabularies, `cmrcx.tasks`) is imported inside the functions that need it, so it loads
after `launch.prepare_process()` keeps it quiet and off accelerators.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

import jax
import numpy as np
from tqdm import tqdm

from cmrcx.benchmarks.lot import formats
from cmrcx.benchmarks.lot import generation as lot_generation
from cmrcx.benchmarks.records import is_json_int
from cmrcx.common.errors import ConfigError, DataFormatError, raise_first
from cmrcx.common.field_types import check_field_types
from cmrcx.common.progress import ticking
from cmrcx.models import decoding, registry
from cmrcx.weights import exports

DECODINGS = ("greedy", "sample", "beam")
SENTENCEPIECE_FILE = "spiece.model"  # a T5 export's vocabulary (GPT-2's: vocab.txt)
LOT_TASKS = {"lot_outgen": "outgen", "lot_plotcom": "plotcom"}  # --task -> the file's task


@dataclasses.dataclass
class GenerationConfig:
    """How `cmrcx.generate` decodes. Defaults: greedy; the LOT setting is a gin file
    (gin names it `GenerationConfig` through `cmrcx.cli.generation`)."""

    decoding: str = "greedy"  # greedy | sample | beam
    max_new_tokens: int = 128  # generated tokens at most, EOS included
    max_input_length: int = 512  # source ids at most (LOT paper sec. 4 and 5.2: 512)
    batch_size: int = 16  # inputs per step (gen.py: 16)
    temperature: float = 1.0  # sample: logits / temperature
    top_k: int = 0  # sample: keep the k most likely tokens; 0: all
    top_p: float = 1.0  # sample: keep the most likely tokens up to this mass; 1: all
    num_beams: int = 4  # beam: hypotheses kept per input
    length_penalty: float = 1.0  # beam: score = sum log-probs / length ** length_penalty
    early_stopping: bool | str = False  # beam: transformers' False | True | "never"
    decoder_start_token_id: int | None = None  # None: the export's (T5: pad, 0)
    seed: int = 0  # sample: the PRNG key
    # LOT files: gen.py's slip, the last character of an output without "</s>" dropped.
    drop_last_char_without_eos: bool = False

    def checked(self, vocab_size: int) -> GenerationConfig:
        """Itself, or ConfigError naming the first bad value."""
        check_field_types(self, "GenerationConfig")
        problems = [
            (self.decoding not in DECODINGS, f"decoding {self.decoding!r}: use one of "
             + ", ".join(DECODINGS)),
            (self.max_new_tokens < 1, f"max_new_tokens {self.max_new_tokens} < 1"),
            (self.max_input_length < 1, f"max_input_length {self.max_input_length} < 1"),
            (self.batch_size < 1, f"batch_size {self.batch_size} < 1"),
            (not self.temperature > 0, f"temperature {self.temperature} is not positive"),
            (self.top_k < 0, f"top_k {self.top_k} < 0"),
            (not 0 < self.top_p <= 1, f"top_p {self.top_p} is not in (0, 1]"),
            (not 1 <= self.num_beams <= vocab_size // 2,
             f"num_beams {self.num_beams}: use 1 to vocab_size / 2 ({vocab_size // 2})"),
            (self.early_stopping not in (False, True, "never"),
             f"early_stopping {self.early_stopping!r}: use False, True or 'never'"),
        ]  # fmt: skip
        raise_first(problems, "GenerationConfig.")
        return self


def load_export(directory: str):
    """(config, params as numpy, path of its vocabulary: the family's `vocab_file`,
    spiece.model or vocab.txt); ConfigError when it is not there."""
    if not os.path.isdir(directory):
        raise ConfigError(f"checkpoint directory not found: {directory}")
    try:
        config = exports.read_model_config(directory)
        if registry.family_of(config).decode_model is None:  # an encoder-only family
            raise ValueError(f"{directory}: not a T5 or GPT-2 export (a {type(config).__name__})")
        config, params = exports.read_network(directory)
    except (FileNotFoundError, ValueError) as error:
        raise ConfigError(f"--checkpoint: {error}") from error
    name = registry.family_of(config).vocab_file
    vocab_path = os.path.join(directory, name)
    if not os.path.isfile(vocab_path):
        raise ConfigError(
            f"{directory} has no {name}: copy the release's vocabulary there "
            "(`python -m cmrcx.convert` copies it)"
        )
    return config, params, vocab_path


def read_inputs(path: str, vocab, vocab_size: int, max_input_length: int):
    """[(input as written: str or list of ids, source ids)] of every line of `path`."""
    import tensorflow as tf  # after launch.prepare_process() (quiet, off accelerators)

    with open(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()  # the final line break ends the last line, it starts none
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        try:
            lines.append(raw.decode("utf-8").strip())
        except UnicodeDecodeError as error:
            raise DataFormatError(f"{path}: line {number}: not UTF-8 text ({error})") from None
    texts = [line for line in lines if not _is_id_list(line, vocab)]
    encoded = iter(vocab.encode_tf(tf.constant(texts)).to_list() if texts else [])
    inputs = []
    for number, line in enumerate(lines, 1):
        if _is_id_list(line, vocab):
            ids = _token_ids(line, vocab_size, max_input_length, f"{path}: line {number}")
            inputs.append((ids, ids))
        elif _is_wordpiece(vocab):  # a decoder-only model continues [CLS] + the text
            inputs.append((line, [vocab.cls_id, *next(encoded)[: max_input_length - 1]]))
        else:
            ids = next(encoded)[: max_input_length - 1]
            inputs.append((line, ids if ids[-1:] == [vocab.eos_id] else [*ids, vocab.eos_id]))
    return inputs


def _is_id_list(line: str, vocab) -> bool:
    """A JSON list of ids: "[" first; with a WordPiece vocabulary, not a marker or special
    token such as "[unused1]" or "[CLS]" starting a text."""
    return line.startswith("[") and not (_is_wordpiece(vocab) and line[1:2].isalpha())


def _is_wordpiece(vocab) -> bool:
    """A WordPiece vocabulary (a decoder-only model's, GPT-2's): BERT's layout reads it."""
    from cmrcx.vocab import layouts  # seqio and TensorFlow: after launch.prepare_process()

    return isinstance(layouts.of_vocabulary(vocab), layouts.BertLayout)


def lot_task_of(path: str, task_flag: str | None) -> str | None:
    """The LOT task ("outgen", "plotcom") whose file `path` is, or None for a text file:
    --task if given, else by the fields of the first line when it is a JSON object
    (`formats.task_of_fields`; a "story" alone: a PlotCom test file). A ClozeT or SenPos
    file is refused, with --task too: its records would be read as PlotCom's."""
    with open(path, "rb") as f:
        first = f.readline().decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    try:
        fields = json.loads(first) if first.startswith("{") else None
    except json.JSONDecodeError:
        fields = None  # a text line that happens to start with "{"
    if not isinstance(fields, dict):
        return None if task_flag is None else LOT_TASKS[task_flag]
    looks_like = formats.task_of_fields(fields)
    if looks_like in ("clozet", "senpos"):
        own = ", ".join(repr(name) for name in formats.OWN_FIELDS[looks_like] if name in fields)
        raise DataFormatError(
            f"{path}: line 1: looks like a LOT {formats.TASK_NAMES[looks_like]} file (it has "
            f"{own}); cmrcx.generate decodes PlotCom and OutGen files only"
        )
    if task_flag is not None:
        return LOT_TASKS[task_flag]
    if looks_like is None and "story" not in fields:
        raise DataFormatError(
            f"{path}: line 1: a JSON object with neither 'outline' (OutGen) nor 'story' "
            "(PlotCom); give --task lot_outgen or --task lot_plotcom"
        )
    return looks_like or "plotcom"


def read_lot_records(path: str, lot_task: str, vocab, max_input_length: int):
    """(the file's records, [(input text, source ids)]): each record's input in the
    authors' format, tokenized as a text line is (cut, then EOS; PlotCom's around its
    blank, as training cut it: `generation.cut_source`)."""
    import tensorflow as tf  # after launch.prepare_process() (quiet, off accelerators)

    from cmrcx.tasks.lot.generation import FIRST_SENTINEL, WORDPIECE_SENTINEL

    cut = lot_generation.cut_source

    records = formats.read_file(lot_task, path)
    if _is_wordpiece(vocab):  # a decoder-only model's prompt: [CLS] SOURCE [SEP]
        texts = [
            lot_generation.source_and_target(record, WORDPIECE_SENTINEL)[0] for record in records
        ]
        texts = [text.removesuffix(WORDPIECE_SENTINEL) for text in texts]
        encoded = vocab.encode_tf(tf.constant(texts)).to_list()
        blank = vocab.token_to_id(WORDPIECE_SENTINEL) if lot_task == "plotcom" else None
        inputs = [(text, [vocab.cls_id, *cut(ids, max_input_length - 2, blank), vocab.sep_id])
                  for text, ids in zip(texts, encoded, strict=True)]  # fmt: skip
        return records, inputs
    texts = [lot_generation.source_and_target(record)[0] for record in records]
    encoded = vocab.encode_tf(tf.constant(texts)).to_list()
    blank = vocab.sentinel_id(FIRST_SENTINEL) if lot_task == "plotcom" else None
    inputs = [(text, [*cut(ids, max_input_length - 1, blank), vocab.eos_id])
              for text, ids in zip(texts, encoded, strict=True)]  # fmt: skip
    return records, inputs


def _token_ids(line: str, vocab_size: int, max_input_length: int, where: str) -> list[int]:
    """A JSON list of ids in [0, vocab_size), 1 to max_input_length of them."""
    try:
        ids = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataFormatError(
            f"{where}: starts with '[' but is not a JSON list ({error})"
        ) from None
    if not isinstance(ids, list) or not ids:
        raise DataFormatError(f"{where}: expected a non-empty JSON list of token ids")
    bad = [i for i in ids if not (is_json_int(i) and 0 <= i < vocab_size)]
    if bad:
        raise DataFormatError(f"{where}: {bad[0]!r} is not a token id (0 to {vocab_size - 1})")
    if len(ids) > max_input_length:
        raise DataFormatError(
            f"{where}: {len(ids)} ids, more than max_input_length {max_input_length}"
        )
    return ids


def bucket_length(longest: int, max_input_length: int) -> int:
    """The next power of two >= longest, at most max_input_length."""
    return min(1 << max(longest - 1, 0).bit_length(), max_input_length)


def padded_batch(sources: list[list[int]], batch_size: int, max_input_length: int, pad_id: int):
    """ids, mask int32 [batch_size, bucket]; filler rows (past len(sources)) hold one pad."""
    length = bucket_length(max(map(len, sources)), max_input_length)
    ids = np.full([batch_size, length], pad_id, np.int32)
    mask = np.zeros([batch_size, length], np.int32)
    mask[len(sources) :, 0] = 1  # filler rows: attention needs one key
    for row, source in enumerate(sources):
        ids[row, : len(source)] = source
        mask[row, : len(source)] = 1
    return ids, mask


def decode(generation: GenerationConfig, model, params, ids, mask, rng):
    """`cmrcx.models.decoding`'s function for generation.decoding -> Decoded."""
    n = generation.max_new_tokens
    if generation.decoding == "sample":
        return decoding.sample(
            model, params, ids, mask, n, rng,
            generation.temperature, generation.top_k, generation.top_p,
        )  # fmt: skip
    if generation.decoding == "beam":
        return decoding.beam_search(
            model, params, ids, mask, n,
            generation.num_beams, generation.length_penalty, generation.early_stopping,
        )  # fmt: skip
    return decoding.greedy(model, params, ids, mask, n)


def readable_text(vocab, ids: Sequence[int]) -> str:
    """T5Tokenizer's decode(ids, skip_special_tokens=True): special ids dropped, the rest
    decoded by SentencePiece, stripped and cleaned up (`cmrcx.vocab.sentencepiece`).
    WordPiece (GPT-2): BertTokenizer's, [PAD] [CLS] [SEP] [UNK] dropped."""
    if _is_wordpiece(vocab):
        special = {vocab.pad_id, vocab.cls_id, vocab.sep_id, vocab.unk_id}
        return vocab.decode([i for i in ids if i not in special])
    special = {vocab.pad_id, vocab.eos_id, vocab.unk_id}
    return vocab.decode([i for i in ids if i not in special and i < vocab.piece_size])


def load_vocabulary(spiece: str, config):
    """The export's vocabulary, read as its family's input layout reads it (T5's
    SentencePiece, GPT-2's WordPiece vocab.txt); ConfigError if it is not the model's."""
    layout = registry.family_of(config).layout
    try:  # TensorFlow loads with the vocabularies: after launch.prepare_process()
        vocab = layout.vocabulary(spiece)
    except (OSError, ValueError, RuntimeError) as error:
        raise ConfigError(str(error)) from error
    if vocab.vocab_size > config.vocab_size:
        raise ConfigError(
            f"{spiece} has {vocab.vocab_size} ids with its sentinels, the model only "
            f"{config.vocab_size}: not this model's vocabulary"
        )
    return vocab


def note_special_id_differences(config, vocab, spiece: str) -> None:
    """Prints a note when the export's pad / eos ids are not its vocabulary's.

    Not an error: a release's config.json may say so, and transformers' generate then
    stops at the config's EOS too; text inputs still end in the vocabulary's (as
    T5Tokenizer appends it) and padding is masked whatever its id.
    """
    from cmrcx.vocab.sentencepiece import special_id_differences  # TensorFlow: see above

    differences = special_id_differences(config, vocab)
    if differences:
        print(f"note: the export's {'; '.join(differences)} ({spiece})", flush=True)


def generations(generation: GenerationConfig, config, params, vocab, inputs):
    """One output record per input, in order, decoded batch by batch under a progress bar."""
    model = registry.decode_model(config)
    params = jax.device_put(params)
    batch_size = min(generation.batch_size, max(len(inputs), 1))  # one batch shape per run
    key = jax.random.key(generation.seed)
    starts = range(0, len(inputs), batch_size)
    bar = tqdm(starts, desc="generate", unit="batch")
    with ticking(bar) as ticker:  # the elapsed time moves during a long batch
        for index, start in enumerate(bar):
            chunk = inputs[start : start + batch_size]
            ids, mask = padded_batch(
                [source for _, source in chunk], batch_size, generation.max_input_length,
                config.pad_token_id,
            )  # fmt: skip
            rng = jax.random.fold_in(key, index)
            decoded = decode(generation, model, params, ids, mask, rng)
            tokens, lengths = np.asarray(decoded.tokens), np.asarray(decoded.lengths)
            ticker.paused = True  # the consumer's time, not this batch's
            for row, (written, _) in enumerate(chunk):
                generated = tokens[row, : lengths[row]].tolist()
                yield {"input": written, "text": readable_text(vocab, generated), "ids": generated}
            ticker.paused = False


def write_lot_predictions(output: str, records, outputs, vocab, eos_id: int, drop_last: bool):
    """The official file's schema: each record with its target set to the cleaned output."""
    from cmrcx.tasks.lot.generation import decoded_output  # TensorFlow: after start-up

    texts = [
        lot_generation.generation_text(decoded_output(vocab, out["ids"], eos_id), drop_last)
        for out in outputs
    ]
    formats.write_predictions(output, records, texts)


def write_generations(
    generation: GenerationConfig,
    config,
    params,
    vocab_path: str,
    input_path: str,
    lot_task: str | None,
    output: str,
) -> int:
    """Decodes every input of `input_path` (a LOT `lot_task` file, or lines when None) and
    writes `output`; returns how many inputs there were. Call after
    `launch.prepare_process()`: the vocabulary loads TensorFlow."""
    vocab = load_vocabulary(vocab_path, config)
    if not _is_wordpiece(vocab):
        note_special_id_differences(config, vocab, vocab_path)
    if lot_task is None:
        inputs = read_inputs(input_path, vocab, config.vocab_size, generation.max_input_length)
    else:
        records, inputs = read_lot_records(input_path, lot_task, vocab, generation.max_input_length)
    if generation.decoder_start_token_id is not None and hasattr(config, "decoder_start_token_id"):
        config = dataclasses.replace(
            config, decoder_start_token_id=generation.decoder_start_token_id
        )
    os.makedirs(os.path.dirname(output), exist_ok=True)
    outputs = generations(generation, config, params, vocab, inputs)
    if lot_task is not None:
        write_lot_predictions(
            output, records, list(outputs), vocab, config.eos_token_id,
            generation.drop_last_char_without_eos,
        )  # fmt: skip
    else:
        with open(output, "w", encoding="utf-8") as out:
            for record in outputs:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(inputs)
