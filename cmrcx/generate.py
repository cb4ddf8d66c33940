"""`python -m cmrcx.generate --checkpoint DIR --input FILE --output FILE.jsonl`: T5 and GPT-2
generation.

DIR is a cmrcx T5 export (`python -m cmrcx.convert` of a LongLM / T5 / mT5 release:
params/, model_config.json with "family": "t5", and the release's spiece.model).
Each line of FILE (UTF-8) is one input, surrounding white space stripped as LongLM's
gen.py does (thu-coai/LOT-LongLM baselines/generation/gen.py):
- a line whose first character is "[" is a JSON list of token ids, used as given;
- any other line is text, tokenized with DIR/spiece.model as transformers' T5Tokenizer
  does (`cmrcx.vocab.sentencepiece`) and cut to max_input_length - 1 ids, then EOS is
  appended, unless the ids already end with it: gen.py's `tokenizer(texts,
  truncation=True, max_length=512)` (add_special_tokens defaults to true).
FILE.jsonl gets one JSON object per input line, in order: {"input": the text or the
id list, "ids": the generated ids (EOS included when one was generated), "text": those
ids decoded as T5Tokenizer's `decode(ids, skip_special_tokens=True)` (pad, EOS, unk and
the sentinels dropped)}.

Special ids are the export's (a converted release's config.json): decoding starts
from decoder_start_token_id, stops at eos_token_id and fills after it with
pad_token_id. Inputs are padded under an explicit attention mask, so every id of a
line is attended, 0 included (<unk> in LongLM's spiece.model, whose ids are <unk> 0,
</s> 2, <pad> 5). When the export's pad / eos ids are not its spiece.model's, a note
says so (text lines still end in the vocabulary's EOS, as T5Tokenizer appends it).

LOT files: with --task lot_outgen|lot_plotcom, or when FILE's first line is a JSON object
(an "outline" or "title" field: OutGen; a "plot", or a "story" alone: PlotCom), FILE is an
official OutGen or PlotCom jsonl file (thu-coai/LOT-LongLM datasets/<task>/README.md; a
test file without targets too). A ClozeT ("plot0", "plot1") or SenPos ("sentence") file
is refused: it has no text to generate. Each record's input is built in the authors' format
(`cmrcx.benchmarks.lot.generation`: OutGen `TITLE#p1#...#pn<extra_id_1>`, PlotCom the
story with its blank replaced by `<extra_id_1>`), tokenized and cut as above, and the
output is cleaned as the authors' gen.py does (`generation_text`: cut at "</s>", special
tokens and white space removed, half-width punctuation made full width; with
GenerationConfig.drop_last_char_without_eos, gen.py's slip too). FILE.jsonl is then the
official file's schema, line by line: each record as read, its target ("story" /
"plot") set to the generation, which the official eval.py (and `cmrcx.score`) scores.
Without --gin_file, a LOT file is decoded with runs/lot_generation.gin (the paper's).

GPT-2 (a decoder-only family: a cmrcx export of uer/gpt2-chinese-cluecorpussmall with its
vocab.txt): the model continues each input. A text line is `[CLS]` + its WordPiece ids
(BertTokenizer's, cut to max_input_length - 1), as UER-py's scripts/generate_lm.py starts
a text (`[CLS_TOKEN] + tokenize(line)`, then `src[:seq_length]`; dbiir/UER-py @78db1360)
and its LM pretraining data frames each line (`[CLS] line [SEP]`: uer/utils/data.py
`LmDataset`, @0038f1c4; the model card's preprocess.py `--data_processor lm`). The model
card's `TextGenerationPipeline(model, BertTokenizer)` example feeds the text without
[CLS] (transformers' text-generation pipeline tokenizes with add_special_tokens=False).
A LOT record is the prompt its fine-tuning reads, `[CLS] SOURCE [SEP]`
(`cmrcx.tasks.lot.generation.lm_tokenize_and_trim`); "text" is BertTokenizer's
`decode(ids, skip_special_tokens=True)` (tokens joined by spaces); decoding stops at the
export's eos_token_id ([SEP]). GenerationConfig.decoder_start_token_id is unused.

Decoding options are a gin-configurable `GenerationConfig` (default: greedy);
`--gin_file=runs/lot_generation.gin` is the LOT paper's top-k sampling. Flags
(--decoding greedy|sample|beam, --top_k, --top_p, --temperature, --num_beams,
--length_penalty, --max_new_tokens, --max_input_length, --batch_size, --seed) override
gin. Inputs go in batches of batch_size, each padded to a bucket length (the next
power of two, at most max_input_length), so there is one compilation per bucket.
Sampling draws batch i with fold_in(key(seed), i): the same inputs, batch size and
seed give the same output. A missing or non-T5 checkpoint, a missing input file or a
malformed input line prints `error: <message>` (file and line) and exits with status 2.
"""

from __future__ import annotations

from collections.abc import Sequence

from cmrcx.cli import startup

if __name__ == "__main__":  # before JAX and TensorFlow load (see cmrcx.cli.startup)
    startup.start()

from cmrcx.cli import generation, launch  # noqa: E402


def main(argv: Sequence[str]) -> None:
    generation.generate(generation.parse_flags(argv, __doc__))


if __name__ == "__main__":
    launch.main_guard(main)
