"""GPT-2: cmrcx's sampling and LM fine-tuning step against transformers' GPT2LMHeadModel.

generate_gpt2 / train_gpt2 (GPT2-base geometry, uer/gpt2-chinese-cluecorpussmall's, random
init, float32), with the harness's children, pinning and alternation, once per batch size.
generate_gpt2: cmrcx's `decoding.sample` over `GPT2DecodeModel` (the prompt's keys and
values once, then one jitted while_loop over a KV cache) against transformers'
`generate(do_sample=True, top_k=40, use_cache=True)`, exactly --target_length new tokens
per row after an --input_length prompt (EOS disabled as in t5.py); a "step" is one whole
generate call and tokens/s counts generated tokens. train_gpt2: `CausalLMModel`'s step
under the Trainer (prompt + continuation, the loss on the continuation) against
GPT2LMHeadModel(labels=...) with the prompt's labels -100, both AdamW lr 3e-5 (LOT section
5.2) with global-norm clipping at 1.0, dropout 0.1; tokens/s counts prompt + target tokens.
memory --models gpt2_base: the same step's compiled memory.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from . import harness, steps, t5

COMMANDS = ("generate_gpt2", "train_gpt2")
WORKER = "_gpt2_worker"
TOP_K = t5.TOP_K
NO_EOS = t5.NO_EOS  # cmrcx: no sampled id equals it; torch: min_new_tokens masks EOS
LEARNING_RATE = 3e-5  # LOT section 5.2
KEYS = t5.KEYS


@dataclasses.dataclass(frozen=True)
class Geometry:
    """GPT-2 geometry and batch shape; defaults GPT2-base (gin_configs/models/gpt2/base.gin)
    with LOT's 512-token prompts."""

    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    vocab: int = 21128
    n_positions: int = 1024
    input_length: int = 512  # prompt tokens
    target_length: int = 128  # train_gpt2: target tokens; generate_gpt2: new tokens
    batch: int = 4


PRESETS = {"gpt2_base": Geometry()}
FIELDS = [f.name for f in dataclasses.fields(Geometry)]


def tokens_per_call(g: Geometry, command: str) -> int:
    if command == "generate_gpt2":
        return g.batch * g.target_length
    return g.batch * (g.input_length + g.target_length)


def lm_batch(g: Geometry, seed: int = 0) -> dict[str, np.ndarray]:
    """`t5.seq2seq_batch`'s full-length rows with GPT-2's ids: targets end in [SEP] 102."""
    batch = t5.seq2seq_batch(
        t5.Geometry(vocab=g.vocab, input_length=g.input_length,
                    target_length=g.target_length, batch=g.batch), seed,
    )  # fmt: skip
    batch["targets"][:, -1] = 102
    return batch


def cmrcx_config(g: Geometry, dtype="float32", remat_policy="none", eos_token_id=102):
    from cmrcx.models.gpt2 import GPT2Config

    return GPT2Config(
        vocab_size=g.vocab, n_positions=g.n_positions, n_embd=g.n_embd, n_layer=g.n_layer,
        n_head=g.n_head, eos_token_id=eos_token_id, dtype=dtype, remat_policy=remat_policy,
    )  # fmt: skip


def lm_trainer(g: Geometry, dtype="float32", remat_policy="none"):
    """A cmrcx Trainer on one device for CausalLMModel, AdamW lr 3e-5."""
    from cmrcx.model_api.causal_lm import CausalLMModel
    from cmrcx.models import registry
    from cmrcx.training.trainer import adamw_with_warmup

    network = registry.network(cmrcx_config(g, dtype, remat_policy), "causal_lm")
    model = CausalLMModel(network, g.input_length, g.target_length)
    optimizer = adamw_with_warmup(LEARNING_RATE, 1000)
    return steps.one_device_trainer(model, optimizer, model.example_batch(g.batch))


def cmrcx_step(args, g: Geometry):
    """cmrcx's decoding.sample call (generate_gpt2) or LM train step (train_gpt2)."""
    import itertools

    import flax.linen as nn
    import jax

    from cmrcx.models import decoding
    from cmrcx.models.gpt2 import GPT2DecodeModel, GPT2LMHeadModel

    batch = lm_batch(g, args.seed)
    if args.mode == "train_gpt2":
        step = steps.cmrcx_train_step(lm_trainer(g), batch)
        return step, lambda: {"min_new_tokens": g.target_length}
    config = cmrcx_config(g, eos_token_id=NO_EOS)
    inputs, mask = jax.device_put(batch["inputs"]), jax.device_put(batch["inputs_mask"])
    init = jax.jit(lambda rng: nn.meta.unbox(GPT2LMHeadModel(config).init(rng, inputs, mask)))
    params = jax.block_until_ready(init(jax.random.key(args.seed))["params"])
    calls, lengths = itertools.count(), []

    def step():
        rng = jax.random.fold_in(jax.random.key(args.seed), next(calls))
        out = decoding.sample(
            GPT2DecodeModel(config), params, inputs, mask, g.target_length, rng, top_k=TOP_K
        )
        lengths.append(int(np.min(jax.device_get(out.lengths))))  # synchronises

    return step, lambda: {"min_new_tokens": min(lengths)}


def torch_config(g: Geometry):
    import transformers

    return transformers.GPT2Config(
        vocab_size=g.vocab, n_positions=g.n_positions, n_embd=g.n_embd, n_layer=g.n_layer,
        n_head=g.n_head, bos_token_id=101, eos_token_id=102, pad_token_id=0,
    )  # fmt: skip


def torch_step(args, g: Geometry):
    """transformers' GPT-2 generate (top-k sampling, KV cache) or LM train step."""
    import torch
    import transformers

    batch = steps.torch_batch(lm_batch(g, args.seed))
    model = transformers.GPT2LMHeadModel(torch_config(g))
    ids = torch.cat([batch["inputs"], batch["targets"]], 1)
    if args.mode == "train_gpt2":
        labels = ids.clone()
        labels[:, : g.input_length] = -100  # the loss on the continuation only

        def loss():
            return model(input_ids=ids, labels=labels).loss

        step = steps.torch_train_step(model, loss, LEARNING_RATE, 1e-8)
        return step, lambda: {"min_new_tokens": g.target_length}
    model.eval()
    lengths = []

    def step():
        with torch.inference_mode():
            out = model.generate(
                input_ids=batch["inputs"], attention_mask=batch["inputs_mask"], do_sample=True,
                top_k=TOP_K, temperature=1.0, max_new_tokens=g.target_length,
                min_new_tokens=g.target_length, use_cache=True, pad_token_id=0,
            )  # fmt: skip
        lengths.append(out.shape[1] - g.input_length)

    return step, lambda: {"min_new_tokens": min(lengths)}


def worker_geometry(args) -> Geometry:
    return Geometry(**{name: int(getattr(args, name)) for name in FIELDS})


def compare(args) -> dict:
    """generate_gpt2 / train_gpt2: alternating cmrcx / torch children per batch size."""
    base = Geometry(**{name: getattr(args, name) for name in FIELDS if name != "batch"})
    results = []
    for batch in [int(b) for b in str(args.batch).split(",")]:
        g = dataclasses.replace(base, batch=batch)
        runs = harness.alternate(args, WORKER, g)
        tokens = tokens_per_call(g, args.command)
        summarize = functools.partial(t5.side_summary, warmup=args.warmup, tokens=tokens)
        sides = harness.compare_sides(runs, summarize, KEYS.median)
        results.append({"geometry": dataclasses.asdict(g), "tokens_per_call": tokens, **sides})
    return {
        "benchmark": args.command,
        "machine": harness.machine_info(args.cpus),
        "setting": setting(args.command, base),
        "method": harness.method(args),
        "results": results,
    }


def setting(command: str, g: Geometry) -> str:
    if command == "generate_gpt2":
        return (f"{g.input_length}-token prompts, top-k {TOP_K} sampling, temperature 1.0, "
                f"KV cache, exactly {g.target_length} new tokens (EOS disabled)")  # fmt: skip
    return (f"LM step on prompt + continuation, loss on the continuation, dropout 0.1, "
            f"AdamW lr {LEARNING_RATE}, global-norm clip 1.0; tokens = batch x "
            "(prompt + target)")  # fmt: skip


def print_report(report: dict) -> None:
    report = {**report, "benchmark": report["benchmark"].replace("generate_gpt2", "generate")}
    t5.print_report(report)


def add_commands(commands) -> None:
    """generate_gpt2, train_gpt2 and their worker."""
    for name, batch, target in (("generate_gpt2", "1,8", 64), ("train_gpt2", "4", 128),
                                (WORKER, "4", 128)):  # fmt: skip
        sub = commands.add_parser(name)
        for field in FIELDS[:-2]:
            sub.add_argument(f"--{field}", type=int, default=getattr(Geometry(), field))
        sub.add_argument("--target_length", type=int, default=target,
                         help="generate_gpt2: new tokens; train_gpt2: target tokens")  # fmt: skip
        sub.add_argument("--batch", default=batch, help="batch size(s), comma-separated")
        harness.add_timing_flags(sub, "calls", "as train's")
    harness.add_worker_flags(commands.choices[WORKER], COMMANDS)


MEMORY_MODELS = tuple(PRESETS)


def memory_geometry(name: str, args) -> Geometry:
    target = args.target_length or args.seq
    return dataclasses.replace(
        PRESETS[name], batch=args.batch, input_length=args.seq, target_length=target
    )


def memory_trainer(g: Geometry, dtype: str, remat_policy: str):
    return lm_trainer(g, dtype, remat_policy), lm_batch(g)


def describe(g: dict) -> str:
    return (f"{g['n_layer']} layers, n_embd {g['n_embd']}, batch {g['batch']} x "
            f"{g['input_length']}+{g['target_length']}")  # fmt: skip
