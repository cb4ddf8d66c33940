"""T5 / LongLM: cmrcx's generation and seq2seq train step against transformers' T5.

generate / train_t5 (T5 v1.0 at LongLM geometry, random init, float32), with the
harness's children, pinning and alternation, once per batch size. generate: per
--method, cmrcx's `decoding.sample` / `greedy` / `beam_search` (one jitted while_loop,
KV cache) against transformers' `generate(do_sample=True, top_k=40)` /
`(do_sample=False)` / `(num_beams=4)`, use_cache=True, exactly --target_length new
tokens per row (EOS disabled, see NO_EOS); a "step" is one whole generate call and
tokens/s counts generated tokens (beam search: those of the returned hypotheses).
train_t5: Seq2SeqModel's teacher-forced step under the Trainer against
T5ForConditionalGeneration(labels=...), both AdamW lr 1e-4 with global-norm clipping
at 1.0, dropout 0.1; tokens/s counts input + target tokens.
memory --models longlm_large: the same step's compiled memory at LongLM-large.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from . import harness, steps

COMMANDS = ("generate", "train_t5")
WORKER = "_t5_worker"
TOP_K = 40  # generate: top-k sampling, temperature 1.0
NUM_BEAMS = 4  # generate --method beam: length_penalty 1.0, early_stopping False
METHODS = ("sample", "greedy", "beam")
# generate's cmrcx eos_token_id: no sampled id (0 .. vocab-1) equals it, so no row stops
# early. The torch side keeps eos 1 and passes min_new_tokens = max_new_tokens, whose
# logits processor sets EOS's logit to -inf at every step: it never stops early either.
NO_EOS = -1
LEARNING_RATE = 1e-4  # LongLM pretraining: Adam, lr 1e-4 (LOT paper section 4)
KEYS = harness.SummaryKeys("median_seconds", "first_call_seconds", "seconds_per_round")


# ---------------------------------------------------------------- geometry


@dataclasses.dataclass(frozen=True)
class Geometry:
    """T5 v1.0 geometry (ReLU FFN, tied LM head) and batch shape; defaults LongLM-small
    (gin_configs/models/longlm_small.gin)."""

    d_model: int = 512
    d_ff: int = 2048
    d_kv: int = 64
    heads: int = 8
    layers: int = 6  # encoder blocks
    decoder_layers: int = 6
    vocab: int = 32128
    input_length: int = 512
    target_length: int = 128  # train_t5: target tokens; generate: new tokens
    batch: int = 4


PRESETS = {
    "longlm_small": Geometry(),
    # gin_configs/models/longlm_large.gin (LOT paper Table 8): 1B parameters.
    "longlm_large": Geometry(d_model=1536, d_ff=3072, heads=12, layers=24, decoder_layers=32),
}
FIELDS = [f.name for f in dataclasses.fields(Geometry)]


def tokens_per_call(g: Geometry, command: str) -> int:
    """Generated tokens (generate); input + target tokens (train_t5)."""
    if command == "generate":
        return g.batch * g.target_length
    return g.batch * (g.input_length + g.target_length)


def seq2seq_batch(g: Geometry, seed: int = 0) -> dict[str, np.ndarray]:
    """Random full-length rows (int32), as Seq2SeqModel reads them: inputs, inputs_mask
    [batch, input_length]; targets (ending in EOS 1), targets_mask [batch, target_length];
    example_mask [batch]. Ids avoid pad 0 and EOS 1."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(2, g.vocab, [g.batch, g.target_length], dtype=np.int32)
    targets[:, -1] = 1
    return {
        "inputs": rng.integers(2, g.vocab, [g.batch, g.input_length], dtype=np.int32),
        "inputs_mask": np.ones([g.batch, g.input_length], np.int32),
        "targets": targets,
        "targets_mask": np.ones([g.batch, g.target_length], np.int32),
        "example_mask": np.ones([g.batch], np.int32),
    }


def _shared_config(g: Geometry) -> dict:
    """The T5Config fields cmrcx and transformers name alike."""
    return {
        "vocab_size": g.vocab,
        "d_model": g.d_model,
        "d_kv": g.d_kv,
        "d_ff": g.d_ff,
        "num_layers": g.layers,
        "num_decoder_layers": g.decoder_layers,
        "num_heads": g.heads,
        "feed_forward_proj": "relu",
        "tie_word_embeddings": True,
    }


# ---------------------------------------------------------------- cmrcx side


def cmrcx_config(g: Geometry, dtype="float32", remat_policy="none", eos_token_id=1):
    """cmrcx's T5Config of geometry `g` (the rest as longlm_small.gin)."""
    from cmrcx.models.t5 import T5Config

    return T5Config(
        **_shared_config(g), eos_token_id=eos_token_id, dtype=dtype, remat_policy=remat_policy
    )


def seq2seq_trainer(g: Geometry, dtype="float32", remat_policy="none"):
    """A cmrcx Trainer on one device for Seq2SeqModel (teacher forcing), AdamW lr 1e-4."""
    from cmrcx.model_api.seq2seq import Seq2SeqModel
    from cmrcx.models import registry
    from cmrcx.training.trainer import adamw_with_warmup

    network = registry.network(cmrcx_config(g, dtype, remat_policy), "seq2seq")
    model = Seq2SeqModel(network, g.input_length, g.target_length)
    optimizer = adamw_with_warmup(LEARNING_RATE, 1000)
    return steps.one_device_trainer(model, optimizer, model.example_batch(g.batch))


def cmrcx_step(args, g: Geometry):
    """cmrcx's decoding.sample call (generate) or Seq2Seq train step (train_t5)."""
    import itertools

    import flax.linen as nn
    import jax

    from cmrcx.models import decoding
    from cmrcx.models.t5 import T5DecodeModel, T5ForConditionalGeneration

    batch = seq2seq_batch(g, args.seed)
    if args.mode == "train_t5":
        step = steps.cmrcx_train_step(seq2seq_trainer(g), batch)
        return step, lambda: {"min_new_tokens": g.target_length}
    config = cmrcx_config(g, eos_token_id=NO_EOS)
    model = T5ForConditionalGeneration(config)
    inputs, mask = jax.device_put(batch["inputs"]), jax.device_put(batch["inputs_mask"])
    init = jax.jit(lambda rng: nn.meta.unbox(model.init(rng, inputs, mask, inputs[:, :1])))
    params = jax.block_until_ready(init(jax.random.key(args.seed))["params"])
    calls, lengths = itertools.count(), []

    decode_model = T5DecodeModel(config)

    def step():
        rng = jax.random.fold_in(jax.random.key(args.seed), next(calls))
        call = (decode_model, params, inputs, mask, g.target_length)
        if args.method == "sample":
            out = decoding.sample(*call, rng, top_k=TOP_K)
        elif args.method == "greedy":
            out = decoding.greedy(*call)
        else:
            out = decoding.beam_search(*call, NUM_BEAMS)
        lengths.append(int(np.min(jax.device_get(out.lengths))))  # synchronises

    return step, lambda: {"min_new_tokens": min(lengths)}


# ---------------------------------------------------------------- torch side


def torch_config(g: Geometry):
    """transformers' T5Config of geometry `g`, as cmrcx_config's (dropout 0.1)."""
    import transformers

    return transformers.T5Config(
        **_shared_config(g),
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        dropout_rate=0.1,
        layer_norm_epsilon=1e-6,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )


def torch_step(args, g: Geometry):
    """transformers' T5 generate (top-k sampling, KV cache) or train step (AdamW)."""
    import torch
    import transformers

    batch = steps.torch_batch(seq2seq_batch(g, args.seed))
    model = transformers.T5ForConditionalGeneration(torch_config(g))
    if args.mode == "train_t5":

        def loss():
            inputs, mask = batch["inputs"], batch["inputs_mask"]
            return model(input_ids=inputs, attention_mask=mask, labels=batch["targets"]).loss

        step = steps.torch_train_step(model, loss, LEARNING_RATE, 1e-6)
        return step, lambda: {"min_new_tokens": g.target_length}
    model.eval()
    lengths = []

    options = {
        "sample": {"do_sample": True, "top_k": TOP_K, "temperature": 1.0},
        "greedy": {"do_sample": False, "num_beams": 1},
        "beam": {"do_sample": False, "num_beams": NUM_BEAMS, "length_penalty": 1.0},
    }[args.method]

    def step():
        with torch.inference_mode():
            out = model.generate(
                input_ids=batch["inputs"],
                attention_mask=batch["inputs_mask"],
                max_new_tokens=g.target_length,
                min_new_tokens=g.target_length,
                use_cache=True,
                **options,
            )
        lengths.append(out.shape[1] - 1)  # without the decoder start token

    return step, lambda: {"min_new_tokens": min(lengths)}


def worker_geometry(args) -> Geometry:
    return Geometry(**{name: int(getattr(args, name)) for name in FIELDS})


# ---------------------------------------------------------------- parent


def side_summary(runs: list[dict], warmup: int, tokens: int) -> dict:
    """harness.side_summary with the fewest new tokens a row got."""
    fewest = min(run["min_new_tokens"] for run in runs)
    return harness.side_summary(runs, warmup, tokens, KEYS, lambda _: {"min_new_tokens": fewest})


def methods_of(args) -> list[str]:
    """generate: the --method list; train_t5: its one step."""
    if args.command != "generate":
        return ["train"]
    methods = args.method.split(",")
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise SystemExit(f"--method {args.method}: use some of {', '.join(METHODS)}")
    return methods


def compare(args) -> dict:
    """generate / train_t5: alternating cmrcx / torch children per method and batch size."""
    base = Geometry(**{name: getattr(args, name) for name in FIELDS if name != "batch"})
    results = []
    for method in methods_of(args):
        for batch in [int(b) for b in str(args.batch).split(",")]:
            g = dataclasses.replace(base, batch=batch)
            runs = harness.alternate(args, WORKER, g, method=method)
            tokens = tokens_per_call(g, args.command)

            summarize = functools.partial(side_summary, warmup=args.warmup, tokens=tokens)
            sides = harness.compare_sides(runs, summarize, KEYS.median)
            geometry = dataclasses.asdict(g)
            results.append(
                {"method": method, "geometry": geometry, "tokens_per_call": tokens, **sides}
            )
    return {
        "benchmark": args.command,
        "machine": harness.machine_info(args.cpus),
        "setting": setting(args.command, base),
        "method": harness.method(args),
        "results": results,
    }


def setting(command: str, g: Geometry) -> str:
    """The report's one-line description of what both sides do."""
    if command == "generate":
        return (f"sample: top-k {TOP_K} sampling, temperature 1.0; greedy; beam: "
                f"{NUM_BEAMS} beams, length penalty 1.0; KV cache, exactly "
                f"{g.target_length} new tokens (cmrcx eos_token_id {NO_EOS}; torch "
                "min_new_tokens = max_new_tokens masks EOS)")  # fmt: skip
    return (f"teacher-forced step, dropout 0.1, AdamW lr {LEARNING_RATE} eps 1e-6 "
            "wd 0.01, global-norm clip 1.0; tokens = batch x (input + target)")  # fmt: skip


def print_report(report: dict) -> None:
    harness.print_header(report)
    print(report["setting"])
    rows = [
        ("median call (s)", "median_seconds", "{:.3f}"),
        ("tokens/s", "tokens_per_second", "{:.1f}"),
        ("first call (s)", "first_call_seconds", "{:.2f}"),
        ("first / steady", "first_over_steady", "{:.2f}"),
        ("system CPU s / call", "system_seconds_per_step", "{:.2f}"),
    ]
    if report["benchmark"] == "generate":
        rows.append(("fewest new tokens in a row", "min_new_tokens", "{}"))
    for result in report["results"]:
        method = f"method {result['method']}; " if report["benchmark"] == "generate" else ""
        print(f"\n{method}geometry: {result['geometry']}; tokens/call {result['tokens_per_call']}")
        harness.print_sides(result, "torch", rows)


# ---------------------------------------------------------------- flags & memory


def add_commands(commands) -> None:
    """generate, train_t5 and their worker."""
    # generate: LongLM-small, 512 input tokens, 64 new tokens, batches 1 and 8;
    # train_t5: LongLM-small, 512 inputs / 128 targets, batch 4.
    for name, batch, target in (("generate", "1,8", 64), ("train_t5", "4", 128),
                                (WORKER, "4", 128)):  # fmt: skip
        sub = commands.add_parser(name)
        for field in FIELDS[:-2]:
            sub.add_argument(f"--{field}", type=int, default=getattr(Geometry(), field))
        sub.add_argument("--target_length", type=int, default=target,
                         help="generate: new tokens; train_t5: target tokens")  # fmt: skip
        sub.add_argument("--batch", default=batch, help="batch size(s), comma-separated")
        methods = {"generate": ",".join(METHODS), "train_t5": "train"}.get(name, "sample")
        sub.add_argument("--method", default=methods,
                         help="generate: some of " + ",".join(METHODS))  # fmt: skip
        harness.add_timing_flags(sub, "calls", "as train's")
    harness.add_worker_flags(commands.choices[WORKER], COMMANDS)


MEMORY_MODELS = tuple(PRESETS)


def memory_geometry(name: str, args) -> Geometry:
    """A preset at --batch, inputs --seq, targets --target_length (default --seq)."""
    target = args.target_length or args.seq
    return dataclasses.replace(
        PRESETS[name], batch=args.batch, input_length=args.seq, target_length=target
    )


def memory_trainer(g: Geometry, dtype: str, remat_policy: str):
    """Seq2SeqModel's (teacher forcing) Trainer and its example batch."""
    return seq2seq_trainer(g, dtype, remat_policy), seq2seq_batch(g)


def describe(g: dict) -> str:
    return (f"{g['layers']}+{g['decoder_layers']} layers, d_model {g['d_model']}, batch "
            f"{g['batch']} x {g['input_length']}/{g['target_length']}")  # fmt: skip
