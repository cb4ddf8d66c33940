"""BERT: cmrcx's cloze and classification steps against Hugging Face's PyTorch BERT.

train / eval / classify: both sides float32 (or with --dtype bfloat16 cmrcx's bf16
compute, as gin_configs/precision/bf16.gin, against torch.autocast(bfloat16): the
comparison for CPUs with AMX or AVX-512 BF16), the same geometry, the same random token
ids, dropout 0.1 on (train), AdamW with global-norm clipping at 1.0. train and eval
are CMRC 2019's cloze model on full 512-token windows; classify is a fine-tuning step
as CLUE's classifiers (AFQMC, TNEWS, IFLYTEK: max length 128, CLUE Table 7; batch 32;
2 classes by default, as AFQMC): cmrcx's ClassificationModel against transformers'
BertForSequenceClassification, sentence pairs of random ids.

FLOPs (flops.py), for L layers, hidden h, batch b, sequence s, T = b*s:
    forward = L * layer + 2*T*h (the cloze head: Linear(h, 1) on every token)
classify replaces the cloze head by the pooler and classifier: 2*b*h*h + 2*b*h*C.
BERT-base at b=2, s=512: forward 193 GFLOP, train 580 GFLOP.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics

import numpy as np

from . import flops, harness, steps

COMMANDS = ("train", "eval", "classify")
WORKER = "_worker"
MAX_BLANKS = 32  # tasks/cmrc2019.py MAX_BLANKS: width of blank_positions
BLANKS_IN_WINDOW = 10  # about the blanks a 512-token CMRC 2019 window holds
CANDIDATE_TOKENS = 16  # [CLS] candidate [SEP]: token type 0
KEYS = harness.SummaryKeys("median_step_seconds", "first_step_seconds", "step_seconds_per_round")
FLOP_FORMULA = (
    "forward = L*(2*T*(4h^2+2hi) + 4*b*s^2*h) + head; train = 3*forward; "
    "head = 2*T*h (cloze), 2*b*h*(h+C) (classify)"
)


# ---------------------------------------------------------------- geometry & FLOPs


@dataclasses.dataclass(frozen=True)
class Geometry:
    """BERT geometry and batch shape of one benchmark."""

    layers: int = 12
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    vocab: int = 21128  # bert-base-chinese
    seq: int = 512
    batch: int = 2

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


PRESETS = {
    "base": Geometry(),
    # RoBERTa-wwm-ext-large (the paper's strongest baseline): BERT-large geometry.
    "large": Geometry(layers=24, hidden=1024, heads=16, intermediate=4096),
}
FIELDS = [f.name for f in dataclasses.fields(Geometry)]


def forward_flops(g: Geometry, num_classes: int = 0) -> float:
    """Matmul FLOPs of one forward pass (formula in the module docstring).

    num_classes 0: the cloze head; else the pooler and a `num_classes` classifier.
    """
    if num_classes:
        head = 2 * g.batch * g.hidden * (g.hidden + num_classes)
    else:
        head = 2 * g.tokens * g.hidden
    return g.layers * flops.layer_flops(g.batch, g.seq, g.hidden, g.intermediate) + head


def step_flops(g: Geometry, mode: str, num_classes: int = 0) -> float:
    """Forward FLOPs for eval; 3x for a train or classify (fine-tuning) step."""
    return (1 if mode == "eval" else flops.TRAIN_OVER_FORWARD) * forward_flops(g, num_classes)


def num_classes(args) -> int:
    """classify's --classes; 0 (the cloze head) for train / eval."""
    return args.classes if args.command == "classify" else 0


# ---------------------------------------------------------------- batches


def synthetic_batch(g: Geometry, seed: int = 0) -> dict[str, np.ndarray]:
    """A full-length window batch (int32), the same for both sides.

    input_ids, token_type_ids, input_mask: [batch, seq]; blank_positions,
    blank_in_window: [batch, 32]; target_blank, example_mask: [batch].
    """
    rng = np.random.default_rng(seed)
    b, s = g.batch, g.seq
    candidate = min(CANDIDATE_TOKENS, s // 4)
    blanks = min(BLANKS_IN_WINDOW, s - candidate - 1)
    positions = np.zeros([b, MAX_BLANKS], np.int32)
    for row in range(b):
        positions[row, :blanks] = np.sort(rng.choice(np.arange(candidate, s), blanks, False))
    return {
        "input_ids": rng.integers(104, g.vocab, [b, s], dtype=np.int32),
        "token_type_ids": (np.arange(s)[None, :] >= candidate).repeat(b, 0).astype(np.int32),
        "input_mask": np.ones([b, s], np.int32),
        "blank_positions": positions,
        "blank_in_window": (np.arange(MAX_BLANKS) < blanks)[None].repeat(b, 0).astype(np.int32),
        "target_blank": rng.integers(0, blanks, [b], dtype=np.int32),
        "example_mask": np.ones([b], np.int32),
    }


def classification_batch(g: Geometry, num_classes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A sentence-pair batch (int32) as AFQMC's: two halves, token types 0 and 1.

    input_ids, token_type_ids, input_mask: [batch, seq]; label, example_mask: [batch].
    """
    rng = np.random.default_rng(seed)
    b, s = g.batch, g.seq
    return {
        "input_ids": rng.integers(104, g.vocab, [b, s], dtype=np.int32),
        "token_type_ids": (np.arange(s)[None, :] >= s // 2).repeat(b, 0).astype(np.int32),
        "input_mask": np.ones([b, s], np.int32),
        "label": rng.integers(0, num_classes, [b], dtype=np.int32),
        "example_mask": np.ones([b], np.int32),
    }


def bench_batch(args, g: Geometry) -> dict[str, np.ndarray]:
    """The worker's batch: a cloze window batch, or a classification batch for classify."""
    if args.mode == "classify":
        return classification_batch(g, args.classes, args.seed)
    return synthetic_batch(g, args.seed)


# ---------------------------------------------------------------- cmrcx side


def _shared_config(g: Geometry) -> dict:
    """The BertConfig fields cmrcx and transformers name alike."""
    return {
        "vocab_size": g.vocab,
        "hidden_size": g.hidden,
        "intermediate_size": g.intermediate,
        "max_position_embeddings": max(512, g.seq),
    }


def cmrcx_config(g: Geometry, dtype: str = "float32", remat_policy: str = "none"):
    """cmrcx's BertConfig of geometry `g`."""
    from cmrcx.models.bert import BertConfig

    return BertConfig(
        **_shared_config(g),
        num_layers=g.layers,
        num_heads=g.heads,
        dtype=dtype,
        remat_policy=remat_policy,
    )


def cmrcx_trainer(g: Geometry, dtype="float32", remat_policy="none", batch=None, classes=0):
    """A cmrcx Trainer on one device: the cloze model of geometry `g`, or with
    `classes` > 0 a classifier fine-tuned as CLUE's (learning rate 2e-5, Adam epsilon
    1e-8: CLUE's run_classifier.py defaults)."""
    from cmrcx.model_api.classification import ClassificationModel
    from cmrcx.model_api.cloze import ClozeModel
    from cmrcx.models import registry
    from cmrcx.training.trainer import adamw_with_warmup

    config = cmrcx_config(g, dtype, remat_policy)
    if classes:
        network = registry.network(config, "classification", num_classes=classes)
        model = ClassificationModel(network, g.seq)
        batch = model.example_batch(g.batch) if batch is None else batch
        return steps.one_device_trainer(
            model, adamw_with_warmup(2e-5, 1000, adam_epsilon=1e-8), batch
        )
    batch = synthetic_batch(g) if batch is None else batch
    model = ClozeModel(registry.network(config, "cloze"))
    return steps.one_device_trainer(model, adamw_with_warmup(5e-5, 1000), batch)


def cmrcx_step(args, g: Geometry):
    """cmrcx's train step, or its scoring step for eval; the jnp.dot rate after."""
    import jax

    batch = bench_batch(args, g)
    classes = args.classes if args.mode == "classify" else 0
    trainer = cmrcx_trainer(g, dtype=args.dtype, batch=batch, classes=classes)
    if args.mode == "eval":
        params = jax.block_until_ready(trainer.init_state()).params

        def step():
            trainer.score(params, batch)  # returns numpy: synchronous
    else:
        step = steps.cmrcx_train_step(trainer, batch)
    return step, lambda: {"matmul": flops.jax_matmul_rate()}


# ---------------------------------------------------------------- torch side


def torch_config(g: Geometry, attn: str, **extra):
    """transformers' BertConfig of geometry `g`, as cmrcx's (dropout 0.1, exact GeLU)."""
    import transformers

    return transformers.BertConfig(
        **_shared_config(g),
        num_hidden_layers=g.layers,
        num_attention_heads=g.heads,
        type_vocab_size=2,
        hidden_act="gelu",  # exact erf GeLU, as cmrcx
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        layer_norm_eps=1e-12,
        attn_implementation=attn,
        **extra,
    )


def torch_classification_model(g: Geometry, attn: str, num_classes: int):
    """HF BertForSequenceClassification (pooler, dropout, linear) taking a batch dict."""
    import transformers

    class TorchClassifier(transformers.BertForSequenceClassification):
        def forward(self, batch):
            outputs = super().forward(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["input_mask"],
            )
            return outputs.logits

    return TorchClassifier(torch_config(g, attn, num_labels=num_classes))


def torch_cloze_model(g: Geometry, attn: str):
    """HF BertModel (no pooler) + the cloze head: Linear(hidden, 1) at the blanks."""
    import torch
    import transformers

    config = torch_config(g, attn)

    class TorchCloze(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config, add_pooling_layer=False)
            self.cloze_head = torch.nn.Linear(g.hidden, 1)

        def forward(self, batch):
            hidden = self.bert(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["input_mask"],
            ).last_hidden_state
            token_logits = self.cloze_head(hidden)[..., 0]
            logits = torch.gather(token_logits, 1, batch["blank_positions"])
            return torch.where(batch["blank_in_window"] > 0, logits, -10000.0)

    return TorchCloze()


def torch_step(args, g: Geometry):
    """The PyTorch train step (AdamW) or no-grad scoring pass; the torch.mm rate after."""
    import torch

    batch = steps.torch_batch(bench_batch(args, g))
    if args.mode == "classify":  # CLUE's run_classifier.py: lr 2e-5, eps 1e-8
        model = torch_classification_model(g, args.attn, args.classes)
        target, learning_rate, eps = "label", 2e-5, 1e-8
    else:
        model = torch_cloze_model(g, args.attn)
        target, learning_rate, eps = "target_blank", 5e-5, 1e-6
    if args.mode == "eval":
        model.eval()

        def score():
            with torch.inference_mode(), _autocast(args.dtype):
                model(batch).float().numpy()

        return score, _torch_matmul

    def loss():
        with _autocast(args.dtype):
            logits = model(batch)
        losses = torch.nn.functional.cross_entropy(logits.float(), batch[target], reduction="none")
        mask = batch["example_mask"].float()
        return torch.sum(losses * mask) / mask.sum().clamp(min=1.0)

    return steps.torch_train_step(model, loss, learning_rate, eps), _torch_matmul


def _autocast(dtype: str):
    """torch.autocast to bfloat16 on CPU for --dtype bfloat16; a no-op context for float32."""
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16")


def _torch_matmul() -> dict:
    return {"matmul": flops.torch_matmul_rate()}


def worker_geometry(args) -> Geometry:
    return Geometry(**{name: getattr(args, name) for name in FIELDS})


# ---------------------------------------------------------------- parent


def side_summary(runs: list[dict], warmup: int, g: Geometry, flops_per_step: float) -> dict:
    """harness.side_summary with examples/s, FLOP/s and its share of the matmul rate;
    compile_seconds gains first_minus_steady."""
    matmul = statistics.median(run["matmul"] for run in runs)

    def figures(median: float) -> dict:
        rate = flops_per_step / median
        return {
            "examples_per_second": g.batch / median,
            "flops_per_second": rate,
            "matmul_2048_flops_per_second": matmul,
            "matmul_share": rate / matmul,
        }

    summary = harness.side_summary(runs, warmup, g.tokens, KEYS, figures)
    if "compile_seconds" in summary:
        first_minus_steady = summary[KEYS.first] - summary[KEYS.median]
        summary["compile_seconds"]["first_minus_steady"] = first_minus_steady
    return summary


def compare(args) -> dict:
    """train / eval / classify: alternating cmrcx / torch children, then the summary."""
    g, classes = worker_geometry(args), num_classes(args)
    runs = harness.alternate(args, WORKER, g, attn=args.attn, classes=classes, dtype=args.dtype)
    flops_per_step = step_flops(g, args.command, classes)
    summarize = functools.partial(
        side_summary, warmup=args.warmup, g=g, flops_per_step=flops_per_step
    )
    sides = harness.compare_sides(runs, summarize, KEYS.median)
    sides["torch"]["attn"] = args.attn
    return {
        "benchmark": args.command,
        "machine": harness.machine_info(args.cpus),
        "geometry": dataclasses.asdict(g),
        "num_classes": classes,
        "dtype": args.dtype,
        "method": harness.method(args),
        "flops_per_step": flops_per_step,
        "flop_formula": FLOP_FORMULA,
        **sides,
    }


ROWS = [
    ("median step (s)", "median_step_seconds", "{:.3f}"),
    ("tokens/s", "tokens_per_second", "{:.1f}"),
    ("examples/s", "examples_per_second", "{:.2f}"),
    ("GFLOP/s", "flops_per_second", "{:.1f}", 1e-9),
    ("2048^3 matmul GFLOP/s", "matmul_2048_flops_per_second", "{:.1f}", 1e-9),
    ("share of matmul rate", "matmul_share", "{:.1%}"),
    ("first step (s)", "first_step_seconds", "{:.2f}"),
    ("first / steady", "first_over_steady", "{:.2f}"),
    ("minor page faults / step", "minor_faults_per_step", "{:.0f}"),
    ("system CPU s / step", "system_seconds_per_step", "{:.2f}"),
]


def print_report(report: dict) -> None:
    harness.print_header(report)
    classes = f", {report['num_classes']} classes" if report["num_classes"] else ""
    gflops = report["flops_per_step"] / 1e9
    dtype = report.get("dtype", "float32")
    print(f"geometry: {report['geometry']}{classes}, {dtype}; FLOPs/step {gflops:.1f} G")
    harness.print_sides(report, f"torch ({report['torch']['attn']})", ROWS)


# ---------------------------------------------------------------- flags & memory


def add_geometry_flags(parser, batch: int, seq: int = 512) -> None:
    defaults = dataclasses.replace(Geometry(), batch=batch, seq=seq)
    for name in FIELDS:
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))


def add_commands(commands) -> None:
    """train, eval, classify and their worker."""
    # classify: CLUE's classifier setting, max length 128 (CLUE Table 7), batch 32.
    for name, batch, seq in (("train", 2, 512), ("eval", 8, 512), ("classify", 32, 128),
                             (WORKER, 2, 512)):  # fmt: skip
        sub = commands.add_parser(name)
        add_geometry_flags(sub, batch, seq)
        sub.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa")
        sub.add_argument(
            "--dtype",
            choices=("float32", "bfloat16"),
            default="float32",
            help="compute dtype: bfloat16 = cmrcx's precision/bf16.gin against torch.autocast",
        )
        harness.add_timing_flags(
            sub, "steps", "GLIBC_TUNABLES for both children, e.g. glibc.malloc.hugetlb=1 "
            "(transparent huge pages for malloc: no page fault per 4 KiB of each fresh step "
            "buffer)"
        )  # fmt: skip
    # AFQMC has 2 classes, CMNLI 3, TNEWS 15, IFLYTEK 119 (cmrcx/benchmarks/clue/tasks.py).
    commands.choices["classify"].add_argument("--classes", type=int, default=2)
    harness.add_worker_flags(commands.choices[WORKER], COMMANDS)
    commands.choices[WORKER].add_argument("--classes", type=int, default=0)


MEMORY_MODELS = (*PRESETS, "custom")


def memory_geometry(name: str, args) -> Geometry:
    """A preset, or "custom" from the geometry flags; at --batch x --seq."""
    g = worker_geometry(args) if name == "custom" else PRESETS[name]
    return dataclasses.replace(g, batch=args.batch, seq=args.seq)


def memory_trainer(g: Geometry, dtype: str, remat_policy: str):
    """The cloze model's Trainer and its example batch."""
    return cmrcx_trainer(g, dtype=dtype, remat_policy=remat_policy), synthetic_batch(g)


def describe(g: dict) -> str:
    return f"{g['layers']} layers, hidden {g['hidden']}, batch {g['batch']} x {g['seq']}"
