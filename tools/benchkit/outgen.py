"""outgen: LOT OutGen generation, cmrcx's `cmrcx.generate` path against transformers'
`generate`, on 242 outlines of the real length.

What runs (each part in its own child of tools/bench.py, pinned as harness.py says):

- prepare (once): 242 synthetic OutGen records (OutGen val's size, LOT paper Table 3),
  each a title and 8 phrases drawn from the bundled sample's (cmrcx/data/lot_sample/outgen,
  about 5 characters a phrase, as the paper's example), written as an official jsonl
  file; a random-init model of --model_gin's geometry (LongLM-small) written twice from
  the same parameters, as a cmrcx export (what `cmrcx.convert` makes) and as a
  HuggingFace directory (`cmrcx.weights.t5.write_hf_dir`); and the records' input ids,
  built and tokenized by `cmrcx.training.generation.read_lot_records` (the authors' input
  ``TITLE#p1#...#p8<extra_id_1>``, then EOS) with the --spiece vocabulary (default the
  bundled tiny one, `cmrcx/data/longlm_tiny`; any LongLM-style spiece.model works).
- cmrcx: `cmrcx.generate`'s LOT-file path: its flags parsed with runs/lot_generation.gin
  (top-k 40, temperature 0.7, decoder start 1), `load_export`, `read_lot_records` (the ids
  checked equal to prepare's), then `generations`: batches of --batch padded to a
  power-of-two bucket, one compilation per bucket, one sampling key per batch.
- torch: `T5ForConditionalGeneration.from_pretrained` of the HuggingFace directory and,
  per batch of the same ids in the same order padded to the longest (gen.py's
  `padding=True`), `generate(do_sample=True, top_k=40, temperature=0.7,
  decoder_start_token_id=1, use_cache=True)`, as the authors' gen.py.

Both sides generate exactly --new_tokens tokens per outline (default 128: the real
stories are about 170 characters, LOT paper Table 3): random weights rarely produce EOS,
and when they do must not stop, so cmrcx's EOS id is NO_EOS (no sampled id equals it) and
transformers gets min_new_tokens = max_new_tokens (EOS's logit -inf until then); each
worker reports the fewest and most new tokens of its rows and the parent refuses a
report where they differ from --new_tokens.

Each worker first warms up, excluded from the timing: cmrcx runs one batch of each
input-length bucket of the pass (compiling each), torch one batch. Then one timed pass
over all outlines: its wall time, tokens/s = outlines x new tokens / wall time, and the
seconds of each batch. Sides alternate (cmrcx, torch, cmrcx, ...) for --rounds per batch
size; reported per side: the median pass and the spread (max - min) / median; the ratio
is cmrcx's speed over transformers' (> 1: cmrcx is faster), from the medians and per round.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from . import harness, steps

COMMANDS = ("outgen",)
WORKER = "_outgen_worker"
PARTS = ("prepare", *harness.SIDES)
MEMORY_MODELS = ()  # nothing for `memory --models`

# The paper's decoding (LOT paper sec. 5.2; gen.py passes decoder_start_token_id=1).
# cmrcx reads it from runs/lot_generation.gin; the parent checks it equals these.
DECODING = {"decoding": "sample", "top_k": 40, "temperature": 0.7, "top_p": 1.0,
            "decoder_start_token_id": 1}  # fmt: skip
NO_EOS = -1  # cmrcx's eos_token_id: no sampled id equals it (as t5.NO_EOS)
OUTLINES = 242  # OutGen val (LOT paper Table 3)
PHRASES = 8  # "8.00 phrases" per outline (LOT paper Table 3)
NEW_TOKENS = 128  # about the real stories' 170 characters (LOT paper Table 3)
SAMPLE_DIR = harness.REPO_ROOT / "cmrcx" / "data" / "lot_sample" / "outgen"
DEFAULT_SPIECE = harness.REPO_ROOT / "cmrcx" / "data" / "longlm_tiny" / "spiece.model"
RECORDS_FILE, IDS_FILE, EXPORT_DIR, HF_DIR = "outgen.jsonl", "input_ids.json", "export", "hf"


# ---------------------------------------------------------------- outlines


def sample_pool() -> tuple[list[str], list[str]]:
    """(titles, phrases) of the bundled sample's OutGen files, in file order."""
    from cmrcx.benchmarks.lot import formats

    records = [r for split in ("train", "val", "test")
               for r in formats.read_file("outgen", SAMPLE_DIR / f"{split}.jsonl")]  # fmt: skip
    return [r.title for r in records], [p for r in records for p in r.outline]


def synthetic_records(count: int, seed: int) -> list[dict]:
    """`count` OutGen test records {"outline": 8 phrases, "title"}, drawn from the sample's
    titles and phrases (no two phrases of an outline alike); the same for the same seed."""
    titles, phrases = sample_pool()
    rng = random.Random(seed)
    return [{"outline": rng.sample(phrases, PHRASES), "title": rng.choice(titles)}
            for _ in range(count)]  # fmt: skip


def write_records(path: Path, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


# ---------------------------------------------------------------- prepare


def prepare(args) -> dict:
    """The records, the model (cmrcx export + HuggingFace directory) and the input ids."""
    import gin
    import jax
    import numpy as np

    from cmrcx.cli import generation as generation_cli
    from cmrcx.cli import launch
    from cmrcx.models import registry
    from cmrcx.training import generation as generate
    from cmrcx.weights import exports
    from cmrcx.weights import t5 as t5_weights

    work = Path(args.workdir)
    records = synthetic_records(args.outlines, args.seed)
    write_records(work / RECORDS_FILE, records)
    launch.parse_gin([args.model_gin, generation_cli.LOT_GIN_FILE], [])
    config = gin.get_configurable("cmrcx.T5Config")()
    max_input_length = generation_cli.GenerationConfig().max_input_length
    params = jax.device_get(init_params(config, args.seed))
    family = registry.family_of(config).name
    exports.export_params(str(work / EXPORT_DIR), {family: params}, config)
    shutil.copyfile(args.spiece, work / EXPORT_DIR / generate.SENTENCEPIECE_FILE)
    t5_weights.write_hf_dir(str(work / HF_DIR), params, config, None)
    launch.prepare_process()  # before the vocabulary imports TensorFlow
    vocab = generate.load_vocabulary(args.spiece, config)
    _, inputs = generate.read_lot_records(
        str(work / RECORDS_FILE), "outgen", vocab, max_input_length
    )
    ids = [source for _, source in inputs]
    (work / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
    lengths = [len(source) for source in ids]
    parameters = int(sum(np.size(leaf) for leaf in jax.tree.leaves(params)))
    return {
        "model": {"model_gin": args.model_gin, "parameters": parameters, **config_fields(config)},
        "outlines": len(records),
        "phrases_per_outline": PHRASES,
        "vocabulary": str(args.spiece),
        "input_characters_mean": statistics.mean(len(text) for text, _ in inputs),
        "input_tokens": {"mean": statistics.mean(lengths), "min": min(lengths),
                         "max": max(lengths)},
    }  # fmt: skip


def init_params(config, seed: int):
    """Random T5ForConditionalGeneration parameters of `config` (flax init)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from cmrcx.models.t5 import T5ForConditionalGeneration

    model = T5ForConditionalGeneration(config)
    ids, mask = jnp.ones([1, 8], jnp.int32), jnp.ones([1, 8], jnp.int32)
    init = jax.jit(lambda rng: nn.meta.unbox(model.init(rng, ids, mask, ids[:, :1])))
    return init(jax.random.key(seed))["params"]


def config_fields(config) -> dict:
    keys = ("vocab_size", "d_model", "d_ff", "d_kv", "num_heads", "num_layers",
            "num_decoder_layers")  # fmt: skip
    return {key: getattr(config, key) for key in keys}


# ---------------------------------------------------------------- timing


def timed_pass(batches) -> dict:
    """One pass over `batches` (an iterator doing one batch per item, which yields the
    new-token counts of its rows): wall and CPU seconds, seconds per batch, token counts."""
    counts, batch_seconds = [], []
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = last = time.perf_counter()
    for batch_counts in batches:
        now = time.perf_counter()
        batch_seconds.append(now - last)
        last = now
        counts += batch_counts
    end = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "pass_seconds": last - start,
        "batch_seconds": batch_seconds,
        "rows": len(counts),
        "min_new_tokens": min(counts),
        "max_new_tokens": max(counts),
        "user_seconds": end.ru_utime - usage.ru_utime,
        "system_seconds": end.ru_stime - usage.ru_stime,
    }


def chunks(items: list, size: int) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)]


# ---------------------------------------------------------------- cmrcx side


def cmrcx_setup(args):
    """(GenerationConfig, T5Config, params, vocab, inputs) as `cmrcx.generate.main` gets
    them for prepare's OutGen file at --batch and --new_tokens; EOS disabled."""
    import dataclasses

    from cmrcx.cli import generation as generation_cli
    from cmrcx.cli import launch
    from cmrcx.training import generation as generate

    work = Path(args.workdir)
    export, records = str(work / EXPORT_DIR), str(work / RECORDS_FILE)
    flags = ["--checkpoint", export, "--input", records, "--output", os.devnull,
             "--gin_file", generation_cli.LOT_GIN_FILE, "--max_new_tokens", str(args.new_tokens),
             "--batch_size", str(args.batch), "--seed", str(args.seed)]  # fmt: skip
    generation = generation_cli.generation_config(generation_cli.parse_flags(flags))
    config, params, spiece = generate.load_export(export)
    generation = generation.checked(config.vocab_size)
    launch.prepare_process()
    vocab = generate.load_vocabulary(spiece, config)
    _, inputs = generate.read_lot_records(records, "outgen", vocab, generation.max_input_length)
    if [source for _, source in inputs] != json.loads((work / IDS_FILE).read_text("utf-8")):
        raise SystemExit("cmrcx: read_lot_records's ids differ from prepare's")
    config = dataclasses.replace(
        config, decoder_start_token_id=generation.decoder_start_token_id, eos_token_id=NO_EOS
    )
    return generation, config, params, vocab, inputs


def cmrcx_worker(args) -> dict:
    """Warm-up (one batch per bucket, compiling it), then `generations` over every input."""
    import jax

    from cmrcx.training import generation as generate

    generation, config, params, vocab, inputs = cmrcx_setup(args)
    params = jax.device_put(params)  # once, outside the timing
    size = min(generation.batch_size, len(inputs))  # as `generations` batches them
    batches = chunks(inputs, size)
    buckets = [generate.bucket_length(max(len(s) for _, s in b), generation.max_input_length)
               for b in batches]  # fmt: skip
    first_of_bucket = {}
    for bucket, batch in zip(buckets, batches, strict=True):
        first_of_bucket.setdefault(bucket, batch)
    # Full batches first, so `generations` cuts the warm-up list into the same batches.
    warmup = [x for b in sorted(first_of_bucket.values(), key=len, reverse=True) for x in b]
    compile_events, after_warmup = steps.compile_recorder()
    start = time.perf_counter()
    for _ in generate.generations(generation, config, params, vocab, warmup):
        pass
    warmup_seconds = time.perf_counter() - start
    after_warmup()

    def each_batch():
        counts = []
        for output in generate.generations(generation, config, params, vocab, inputs):
            counts.append(len(output["ids"]))
            if len(counts) == size:
                yield counts
                counts = []
        if counts:
            yield counts

    return {
        **timed_pass(each_batch()),
        "warmup_seconds": warmup_seconds,
        "compile_events": compile_events,
        "padded_input_lengths": buckets,
        "decoding": {key: getattr(generation, key) for key in DECODING},
    }


# ---------------------------------------------------------------- torch side


def torch_worker(args) -> dict:
    """Warm-up (the first batch), then transformers' generate over every batch."""
    import torch
    import transformers

    torch.set_num_threads(len(args.cpus.split(",")))
    torch.manual_seed(args.seed)
    work = Path(args.workdir)
    model = transformers.T5ForConditionalGeneration.from_pretrained(str(work / HF_DIR))
    model.eval()
    pad = model.config.pad_token_id
    batches = chunks(json.loads((work / IDS_FILE).read_text("utf-8")), args.batch)
    options = {key: value for key, value in DECODING.items() if key != "decoding"}

    def generate(batch: list[list[int]]) -> list[int]:
        longest = max(map(len, batch))  # gen.py: tokenizer(..., padding=True)
        ids = torch.tensor([s + [pad] * (longest - len(s)) for s in batch])
        mask = torch.tensor([[1] * len(s) + [0] * (longest - len(s)) for s in batch])
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids, attention_mask=mask, do_sample=True, **options,
                max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, use_cache=True,
            )  # fmt: skip
        return [out.shape[1] - 1] * len(batch)  # without the decoder start token

    start = time.perf_counter()
    generate(batches[0])
    warmup_seconds = time.perf_counter() - start
    return {
        **timed_pass(generate(batch) for batch in batches),
        "warmup_seconds": warmup_seconds,
        "padded_input_lengths": [max(map(len, batch)) for batch in batches],
    }


def run_part(args) -> dict:
    """The result of the worker's --part: prepare, cmrcx or torch."""
    return {"prepare": prepare, "cmrcx": cmrcx_worker, "torch": torch_worker}[args.part](args)


def run_worker(args) -> None:
    """The worker subcommand: its part's result as a JSON line on stdout."""
    harness.print_result(run_part(args))


# ---------------------------------------------------------------- parent


def worker_command(args, part: str, batch: int, work: str) -> list[str]:
    command = [sys.executable, str(harness.BENCH_SCRIPT), WORKER, "--part", part]
    command += ["--cpus", args.cpus, "--seed", str(args.seed), "--workdir", work]
    command += ["--batch", str(batch), "--new_tokens", str(args.new_tokens)]
    command += ["--outlines", str(args.outlines), "--model_gin", args.model_gin]
    return command + ["--spiece", args.spiece]


def side_summary(runs: list[dict], tokens: int) -> dict:
    """Median pass over the rounds, its spread and the medians of the rest."""
    passes = [run["pass_seconds"] for run in runs]
    median = statistics.median(passes)
    padded = runs[0]["padded_input_lengths"]
    summary = {
        "median_seconds": median,
        "tokens_per_second": tokens / median,
        "seconds_per_round": passes,
        "spread": (max(passes) - min(passes)) / median,
        "median_batch_seconds": statistics.median(t for r in runs for t in r["batch_seconds"]),
        "warmup_seconds": statistics.median(run["warmup_seconds"] for run in runs),
        "min_new_tokens": min(run["min_new_tokens"] for run in runs),
        "max_new_tokens": max(run["max_new_tokens"] for run in runs),
        "mean_padded_input_length": statistics.mean(padded),
        "user_seconds": statistics.median(run["user_seconds"] for run in runs),
        "system_seconds": statistics.median(run["system_seconds"] for run in runs),
    }
    if "compile_events" in runs[0]:
        events = [run["compile_events"] for run in runs]
        summary["compile_seconds"] = {
            key: statistics.median(e.get(key, 0.0) for e in events) for key in events[0]
        }
    return summary


def compare_batch(args, batch: int, work: str, run_child) -> dict:
    """--rounds of a cmrcx child then a torch child at `batch`; both sides' summaries."""
    runs = {side: [] for side in harness.SIDES}
    for round_number in range(1, args.rounds + 1):
        for side in harness.SIDES:
            result = run_child(args, side, worker_command(args, side, batch, work))
            runs[side].append(result)
            print(f"outgen batch {batch}, round {round_number}/{args.rounds}, {side}: "
                  f"{result['pass_seconds']:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
    decoding = runs["cmrcx"][0]["decoding"]
    if decoding != DECODING:
        raise SystemExit(f"outgen: cmrcx decodes with {decoding}, transformers with {DECODING}")
    for side, side_runs in runs.items():
        made = {(r["rows"], r["min_new_tokens"], r["max_new_tokens"]) for r in side_runs}
        if made != {(args.outlines, args.new_tokens, args.new_tokens)}:
            raise SystemExit(f"outgen: {side} made (rows, fewest, most new tokens) {made}, not "
                             f"{args.outlines} x {args.new_tokens}")  # fmt: skip
    tokens = args.outlines * args.new_tokens
    sides = {side: side_summary(runs[side], tokens) for side in harness.SIDES}
    cmrcx, torch = (sides[side]["seconds_per_round"] for side in harness.SIDES)
    return {
        "batch": batch,
        "tokens_per_pass": tokens,
        **sides,
        "speed_ratio_cmrcx_over_torch": sides["torch"]["median_seconds"]
        / sides["cmrcx"]["median_seconds"],
        "ratio_per_round": [t / c for c, t in zip(cmrcx, torch, strict=True)],
    }


def compare(args, run_child=harness.run_child) -> dict:
    """outgen: prepare once, then alternating cmrcx / torch children per batch size.

    run_child(args, part, command) -> the part's result (tests run the parts in-process).
    """
    load_before = list(os.getloadavg())
    args.spiece = os.path.abspath(args.spiece)  # the children run in the repository root
    if os.path.isfile(args.model_gin):
        args.model_gin = os.path.abspath(args.model_gin)
    with tempfile.TemporaryDirectory(prefix="cmrcx_bench_outgen_") as scratch:
        work = os.path.abspath(args.workdir or scratch)
        os.makedirs(work, exist_ok=True)
        prepared = run_child(args, "prepare", worker_command(args, "prepare", 0, work))
        batches = [int(b) for b in str(args.batch).split(",")]
        results = [compare_batch(args, batch, work, run_child) for batch in batches]
    machine = harness.machine_info(args.cpus)
    machine["load_average_before"] = load_before
    return {
        "benchmark": "outgen",
        "machine": machine,
        "setting": setting(args.new_tokens),
        "method": {
            "rounds": args.rounds,
            "glibc_tunables": args.glibc_tunables,
            "warmup": "excluded: cmrcx one batch per input bucket (compiling it), "
            "torch one batch; then one timed pass over every outline",
        },  # fmt: skip
        "model": prepared.pop("model"),
        "data": prepared,
        "new_tokens": args.new_tokens,
        "results": results,
    }


def setting(new_tokens: int) -> str:
    """The report's one-line description of what both sides do."""
    return (f"OutGen input TITLE#p1#...#p8<extra_id_1>; top-k {DECODING['top_k']} "
            f"sampling, temperature {DECODING['temperature']}, decoder start "
            f"{DECODING['decoder_start_token_id']}, KV cache, exactly {new_tokens} new tokens "
            f"(cmrcx: cmrcx.generate's LOT path, eos_token_id {NO_EOS}, inputs padded to "
            "power-of-two buckets; transformers: generate with min_new_tokens = "
            "max_new_tokens, inputs padded to the batch's longest)")  # fmt: skip


def print_report(report: dict) -> None:
    harness.print_header(report)
    before = " ".join(f"{x:.2f}" for x in report["machine"]["load_average_before"])
    print(f"# load average before: {before}")
    print(report["setting"])
    model, data = report["model"], report["data"]
    tokens = data["input_tokens"]
    print(f"model: {model['model_gin']}, {model['parameters']:,} parameters, random init")
    print(f"data: {data['outlines']} synthetic outlines x {data['phrases_per_outline']} "
          f"phrases, {data['input_characters_mean']:.1f} characters, input tokens mean "
          f"{tokens['mean']:.1f} (min {tokens['min']}, max {tokens['max']}) with "
          f"{data['vocabulary']}")  # fmt: skip
    rows = [
        ("median pass (s)", "median_seconds", "{:.1f}"),
        ("tokens/s", "tokens_per_second", "{:.1f}"),
        ("spread (max-min)/median", "spread", "{:.1%}"),
        ("median batch (s)", "median_batch_seconds", "{:.3f}"),
        ("warm-up (s)", "warmup_seconds", "{:.1f}"),
        ("mean padded input length", "mean_padded_input_length", "{:.1f}"),
        ("system CPU s / pass", "system_seconds", "{:.1f}"),
        ("fewest new tokens in a row", "min_new_tokens", "{}"),
    ]
    for result in report["results"]:
        print(f"\nbatch {result['batch']}: {result['tokens_per_pass']} tokens per pass")
        harness.print_sides(result, "transformers", rows)
        print("ratio per round: " + ", ".join(f"{r:.3f}" for r in result["ratio_per_round"]))


# ---------------------------------------------------------------- flags


def add_commands(commands) -> None:
    """outgen and its worker."""
    sub = commands.add_parser("outgen", help="LOT OutGen generation, cmrcx vs transformers")
    sub.add_argument("--batch", default="1,8", help="batch size(s), comma-separated")
    sub.add_argument("--rounds", type=int, default=2, help="A/B rounds per batch size")
    sub.add_argument("--glibc_tunables", help="GLIBC_TUNABLES of both sides' children")
    sub.add_argument("--workdir", help="keep the records, model and ids here (default: a "
                     "temporary directory, removed)")  # fmt: skip
    worker = commands.add_parser(WORKER)
    worker.add_argument("--part", choices=PARTS, required=True)
    worker.add_argument("--workdir", required=True)
    worker.add_argument("--batch", type=int, required=True)
    for parser in (sub, worker):
        parser.add_argument("--outlines", type=int, default=OUTLINES, help="outlines per pass")
        parser.add_argument("--new_tokens", type=int, default=NEW_TOKENS,
                            help="new tokens per outline, on both sides")  # fmt: skip
        parser.add_argument("--model_gin", default="models/t5/longlm_small.gin",
                            help="the model geometry (e.g. models/t5/tiny.gin)")  # fmt: skip
        parser.add_argument("--spiece", default=str(DEFAULT_SPIECE),
                            help="SentencePiece model of the inputs")  # fmt: skip
