"""`RunConfig`: everything one training or evaluation run needs, as a plain dataclass
(the entry points fill it from gin in `cmrcx.cli.launch`), and its record in
MODEL_DIR/run_config.json, which a resumed run must match.

RunConfig holds what every run has (model, data, schedule, mesh, checkpoints); a run
task's own options (CMRC 2019's decoding, LOT generation's sampling) are its
`cmrcx.training.task_options` dataclass in `RunConfig.options`, read as before by their
own names too (`run.decoding`).
"""

from __future__ import annotations

import dataclasses
import os

from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.common.errors import ConfigError
from cmrcx.common.field_types import check_field_types
from cmrcx.common.paths import resolve_path
from cmrcx.models import registry
from cmrcx.models.attention import IMPLEMENTATIONS
from cmrcx.models.bert import BertConfig
from cmrcx.training import task_options
from cmrcx.training.partitioning import RULE_SETS
from cmrcx.training.task_options import LOT_MIXTURE_TASK, TaskOptions

# RunConfig.optimizer
OPTIMIZERS = ("adamw", "released_script", "transformers2_adamw", "clue_mrc_script")
# RunConfig.vocab_file standing for the model family's bundled tiny vocabulary
# (`cmrcx.models.registry.Family.tiny_vocab_file`): local_tiny.gin's, whatever the family.
TINY_VOCABULARY = "cmrcx:tiny"
SELECT_MODES = ("max", "min")  # RunConfig.select_mode


def run_task_names() -> tuple[str, ...]:
    """The tasks RunConfig.task may name: the run-task registry's (`cmrcx.training.run_tasks`,
    which imports TensorFlow and SeqIO: the entry points have set them up by now)."""
    from cmrcx.training.run_tasks import REGISTRY

    return tuple(REGISTRY)


_DATA_HINTS = {
    "longlm": "of the pretraining corpus: a folder of UTF-8 .txt files (novels, stories; "
    "LOT paper section 4), and RunConfig.validation_data_dir a folder of held-out texts",
    "cmrc2019": "cmrc2019_train.json / cmrc2019_dev.json (https://github.com/ymcui/cmrc2019)",
    "clue": "of the task, the unpacked official folder, e.g. afqmc_public/ holding train.json, "
    "dev.json, test.json (https://github.com/CLUEbenchmark/CLUE)",
    "lot": "of the task: the folder of its train.jsonl, val.jsonl and test.jsonl "
    "(https://github.com/thu-coai/LOT-LongLM datasets/<task>/; a copy: "
    "https://huggingface.co/datasets/Jiann/LOT)",
}
_MIXTURE_DATA_HINT = (
    "of LOT: the folder holding clozet/, senpos/, plotcom/ and outgen/, each with the task's "
    "train.jsonl (required), val.jsonl and test.jsonl (https://github.com/thu-coai/LOT-LongLM "
    "datasets/; a copy: https://huggingface.co/datasets/Jiann/LOT)"
)


@dataclasses.dataclass
class RunConfig:
    """One fine-tuning run of any task. Paper values are set in gin_configs/."""

    task: str = "cmrc2019"  # cmrc2019 | clue_afqmc | clue_tnews11 | ... (run_task_names())
    model_dir: str | None = None  # checkpoints, predictions, metrics.jsonl, events
    data_dir: str | None = None  # the task's official files (cmrc2019_*.json; afqmc_public/)
    vocabulary_name: str = "bert_chinese"  # names the SeqIO task: <task>_<name>
    vocab_file: str | None = None  # vocab.txt / spiece.model; None: PRETRAINED/ the family's
    lower_case: bool = True  # lower-case + strip accents (False for cased vocabularies)
    pretrained: str | None = None  # cmrcx export dir with encoder weights; None: random
    require_pretrained: bool = False  # paper configs: refuse to start from random weights
    # The model as the paper's result table names it (CLUE Table 2 "XLNet-mid", LOT Tables
    # 10/11 "GPT2-base"): `cmrcx.eval --mixture` prints its published row beside the run's.
    paper_model: str | None = None
    # The network's config: any registered family's (cmrcx.models.registry), BERT by default.
    model: BertConfig = dataclasses.field(default_factory=BertConfig)
    max_length: int = 512  # tokens per example / window (CMRC 2019 paper: 512)
    train_split: str = "train"
    eval_split: str = "validation"
    batch_size: int = 24  # windows per optimizer step, global (paper: 24)
    grad_accum_steps: int = 1  # the step's batch in this many sequential micro-batches
    # Stop before the first step if XLA's analysis of the compiled step needs more memory
    # than the (CPU) host has available (cmrcx.training.memory_check); False: run anyway.
    check_memory: bool = True
    eval_batch_size: int = 32
    num_epochs: float = 3.0  # over training windows (paper: 3)
    num_train_steps: int | None = None  # overrides num_epochs when set
    learning_rate: float = 3e-5  # paper: 3e-5 (the authors' run.sh: 2e-5)
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-6  # BERT's AdamW (CMRC 2019); CLUE's PyTorch classifier: 1e-8
    # "adamw": the paper setting (AdamW, warm-up then linear decay over the run's steps,
    # global-norm clipping). "released_script": the authors' script exactly (its BertAdam:
    # schedule counted in blanks and applied twice, per-tensor clipping, no bias
    # correction; int(epochs) epochs of whole batches); see cmrcx.training.released_optimizer.
    # "transformers2_adamw": "adamw" with the step of transformers 2.x's AdamW, which CLUE's
    # PyTorch classifiers ran (cmrcx.training.transformers2_adamw). "clue_mrc_script": CLUE's
    # run_mrc.py for CMRC 2018 (its BERTAdam: warm-up then linear decay applied once,
    # per-tensor clipping, no bias correction, pooler frozen; int(epochs) epochs of
    # ceil(windows / batch) steps); see released_optimizer.clue_mrc_learning_rate.
    optimizer: str = "adamw"
    seed: int = 0  # parameters, dropout and data order
    # False: the training windows in file order every epoch, as a script with a
    # SequentialSampler reads them (the CMRC 2019 script-parity test); True: a seeded
    # permutation per epoch (the authors' scripts' RandomSampler, in distribution).
    shuffle_train: bool = True
    mesh_shape: tuple[int, int] = (-1, 1)  # (data, model); -1 takes the rest
    partitioning: str = "data"  # rule set: data | fsdp | tensor (cmrcx.training.partitioning)
    logical_rules: tuple | None = None  # an explicit rules table; overrides `partitioning`
    # Attention: "auto" (jax.nn.dot_product_attention on gpu/tpu, the einsums on cpu),
    # "einsum" or "dot_product" (cmrcx.models.attention).
    attention_implementation: str = "auto"
    # Mesh over several TPU slices / GPU hosts: None, one mesh from jax.make_mesh; or the
    # (data, model) sizes of the mesh across slices (DCN), mesh_shape being one slice's
    # (ICI): mesh_utils.create_hybrid_device_mesh (cmrcx.training.partitioning.make_mesh).
    dcn_mesh_shape: tuple[int, int] | None = None
    log_every: int = 10  # steps between metric lines
    save_every: int = 500  # steps between checkpoints (the last step is always saved)
    keep_checkpoints: int = 3
    eval_every: int | None = None  # steps between evaluations; None: at the end only (or
    # with select_best, every eval_every_epochs)
    # Model selection: None, the final model (CMRC 2019's paper); or a metric the eval
    # split's evaluation reports ("accuracy", CMRC 2018's "AVERAGE", "qac/paper"): the run
    # also evaluates its final step, keeps the best evaluated checkpoint (besides the newest
    # keep_checkpoints), and train's final evaluation, eval and export use it.
    select_best: str | None = None
    select_mode: str = "max"  # "max": higher is better; "min": lower (perplexity, loss)
    # With select_best and eval_every None: an evaluation every this many epochs of steps
    # (rounded down; CLUE's run_mrc.py evaluates CMRC 2018 every 0.5).
    eval_every_epochs: float = 1.0
    tfds_cache_dir: str | None = None  # prepared TFDS data; None: ~/.cache/cmrcx/tfds
    # Training batches read ahead on a background thread (cmrcx.training.prefetch), so an
    # accelerator's step does not wait on the disk; 0: read in the training loop.
    prefetch_batches: int = 2
    # Seq2seq (LongLM): inputs are max_length tokens, targets target_length (paper: 512/512).
    target_length: int = 512
    # The task's own options (cmrcx.training.task_options): its options class, or before
    # checked() its options by name as gin binds them ({"decoding": "assignment"}) or None
    # for the defaults. They read by name as well: run.decoding is run.options.decoding.
    options: TaskOptions | dict | None = None

    def __getattr__(self, name: str):
        """An option of the run's task by its own name (`run.doc_stride`), as when every
        option was a RunConfig field; AttributeError for a name the task does not own."""
        options = self.__dict__.get("options")
        if isinstance(options, TaskOptions) and name in task_options.option_names(type(options)):
            return getattr(options, name)
        if isinstance(options, dict) and name in options:
            return options[name]
        raise AttributeError(
            f"RunConfig has no field or option {name!r}"
            + (f" for the task {self.__dict__['task']!r}" if "task" in self.__dict__ else "")
        )

    def checked(self) -> RunConfig:
        """Paths resolved; ConfigError naming what is missing and how to give it."""
        check_field_types(self, "RunConfig")
        check_field_types(self.model, type(self.model).__name__)
        vocab_file = self.vocab_file
        if vocab_file == TINY_VOCABULARY:
            vocab_file = registry.family_of(self.model).tiny_vocab_file
        run = dataclasses.replace(
            self,
            model_dir=resolve_path(self.model_dir),
            data_dir=resolve_path(self.data_dir),
            vocab_file=resolve_path(vocab_file),
            pretrained=resolve_path(self.pretrained),
        )
        if run.model_dir is None:
            raise ConfigError("MODEL_DIR is not set: add --gin.MODEL_DIR=\"'runs/NAME'\"")
        if run.require_pretrained and run.pretrained is None:
            family = registry.family_of(run.model)
            kind = type(run.model).__name__.removesuffix("Config").replace("Bert", "BERT")
            raise ConfigError(
                f"this config fine-tunes a pretrained {kind} but PRETRAINED is not set: add "
                "--gin.PRETRAINED=\"'DIR'\" with a cmrcx export (python -m cmrcx.export) "
                f"holding params/, model_config.json and {family.vocab_file}. Converting "
                "HuggingFace or Google TF checkpoints into that form is `python -m "
                "cmrcx.convert`."
            )
        if run.task not in run_task_names():
            registered = task_names.find(run.task)  # a paper's name, e.g. "cluewsc2020"
            if registered is None:
                raise ConfigError(
                    f"RunConfig.task {run.task!r}: use one of {', '.join(run_task_names())}; "
                    f"also the papers' names: {task_names.paper_names_text()}"
                )
            run = dataclasses.replace(run, task=registered)
        if run.data_dir is None:
            hint = _DATA_HINTS.get(run.task.split("_")[0], "")
            raise ConfigError(
                "DATA_DIR is not set: add --gin.DATA_DIR=\"'DIR'\" with the official files "
                + (_MIXTURE_DATA_HINT if run.task == LOT_MIXTURE_TASK else hint)
            )
        if run.partitioning not in RULE_SETS:
            raise ConfigError(
                f"RunConfig.partitioning {run.partitioning!r}: use one of {', '.join(RULE_SETS)}"
            )
        if run.attention_implementation not in IMPLEMENTATIONS:
            raise ConfigError(
                f"RunConfig.attention_implementation {run.attention_implementation!r}: use one "
                f"of {', '.join(IMPLEMENTATIONS)}"
            )
        if run.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"RunConfig.optimizer {run.optimizer!r}: use one of {', '.join(OPTIMIZERS)}"
            )
        run = _with_checked_options(run)
        if run.grad_accum_steps < 1 or run.batch_size % run.grad_accum_steps:
            raise ConfigError(
                f"RunConfig.batch_size {run.batch_size} does not split into "
                f"grad_accum_steps {run.grad_accum_steps} equal micro-batches"
            )
        if run.prefetch_batches < 0:
            raise ConfigError(
                f"RunConfig.prefetch_batches {run.prefetch_batches}: use 0 (no read-ahead) or more"
            )
        if run.train_split == "test":
            raise ConfigError(f"train_split 'test' of {run.task} has no answers")
        _check_selection(run)
        if run.vocab_file is None:
            if run.pretrained is None:
                raise ConfigError(
                    "VOCAB_FILE is not set and there is no PRETRAINED to take it from: add "
                    "--gin.VOCAB_FILE=\"'PATH'\" (vocab.txt, or spiece.model for T5/LongLM)"
                )
            name = registry.family_of(run.model).vocab_file  # vocab.txt, spiece.model
            run = dataclasses.replace(run, vocab_file=os.path.join(run.pretrained, name))
        if not os.path.isfile(run.vocab_file):
            raise ConfigError(f"vocabulary file not found: {run.vocab_file}")
        _check_vocabulary_fits(run)
        return run


def _check_vocabulary_fits(run: RunConfig) -> None:
    """ConfigError for a vocabulary file the family's layout does not read (a T5
    spiece.model without <pad>, </s> or <unk>; a vocab.txt that is not one), or a
    WordPiece vocab.txt with more tokens than the model has embedding rows: ids past them
    index nothing, and the first step's loss is NaN (a 'lower the learning rate' message
    that hides the cause)."""
    try:
        tokens = registry.family_of(run.model).layout.file_tokens(run.vocab_file)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    rows = getattr(run.model, "vocab_size", None)
    if tokens is not None and rows is not None and tokens > rows:
        name = type(run.model).__name__
        raise ConfigError(
            f"{run.vocab_file} has {tokens} tokens and the model {rows} embedding rows "
            f"({name}.vocab_size): use the checkpoint's own vocab.txt, or a model with "
            f"vocab_size >= {tokens}"
        )


# What a release folder holds that a cmrcx export does not (cmrcx.convert reads them).
_RELEASE_FILES = ("config.json", "bert_config.json", "pytorch_model.bin", "model.safetensors")


def check_pretrained(pretrained: str, model) -> None:
    """ConfigError for a PRETRAINED that is not a cmrcx export (a missing folder; a
    release that `python -m cmrcx.convert` must convert first; an unreadable
    model_config.json) or whose network differs from the gin model in what its parameters
    mean. The runner calls it before a new run builds or writes anything (only a run's
    start reads PRETRAINED: eval, export and resumes do not)."""
    if not os.path.isdir(pretrained):
        raise ConfigError(f"PRETRAINED {pretrained} is not a directory")
    if os.path.isfile(os.path.join(pretrained, "model_config.json")):
        from cmrcx.weights import exports  # jax and orbax: only for a PRETRAINED run

        try:
            exported = exports.read_model_config(pretrained)
        except (ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            raise ConfigError(
                f"PRETRAINED {pretrained}: its model_config.json does not read as a cmrcx "
                f"export's ({type(error).__name__}: {error})"
            ) from None
        differences = model_differences(exported, model)
        if differences and differences[0][0] == "RunConfig.model":  # another family
            _, saved, ours = differences[0]
            raise ConfigError(
                f"PRETRAINED {pretrained} is an export of {saved}, the gin model is {ours}: "
                "use a gin file of the checkpoint's family"
            )
        if differences:
            field, saved, ours = differences[0]
            leaf = field.split(".")[-1]
            value = f'"{saved!r}"' if isinstance(saved, str) else repr(saved)
            raise ConfigError(
                f"PRETRAINED {pretrained} has {leaf}={saved!r} in its model_config.json, the "
                f"gin model has {ours!r} ({field}): include the models/*.gin file of this "
                f"checkpoint, or bind --gin.cmrcx.{type(model).__name__}.{leaf}={value}"
            )
        return
    convert = (
        f"convert it first: python -m cmrcx.convert --from {pretrained} --to DIR, then "
        "--gin.PRETRAINED=\"'DIR'\" (docs/models.md)"
    )
    names = set(os.listdir(pretrained))
    if names.intersection(_RELEASE_FILES) or any(
        n.startswith(("bert_model", "model.ckpt")) for n in names
    ):
        raise ConfigError(
            f"PRETRAINED {pretrained} is a released checkpoint, not a cmrcx export: {convert}"
        )
    raise ConfigError(
        f"PRETRAINED {pretrained} is not a cmrcx export (no model_config.json): give the "
        "folder `python -m cmrcx.convert` or `python -m cmrcx.export` wrote; for a "
        f"release, {convert}"
    )


def with_task_options(run: RunConfig) -> RunConfig:
    """`run` with its options as its task's options class (from the flat values gin
    binds, or the defaults); the task must be a registered one."""
    from cmrcx.training.run_tasks.base import run_task_options

    return dataclasses.replace(run, options=run_task_options(run))


def _with_checked_options(run: RunConfig) -> RunConfig:
    """`with_task_options(run)`, the options' types and values checked by their class."""
    run = with_task_options(run)
    check_field_types(run.options, "RunConfig")
    return dataclasses.replace(run, options=run.options.checked(run))


def _check_selection(run: RunConfig) -> None:
    """ConfigError for a model selection that cannot work (the task's own metric names are
    checked by the runner, which knows them)."""
    if run.select_mode not in SELECT_MODES:
        raise ConfigError(
            f"RunConfig.select_mode {run.select_mode!r}: use one of {', '.join(SELECT_MODES)}"
        )
    if run.select_best is None:
        return
    if run.eval_split == "test":
        raise ConfigError(
            f"RunConfig.select_best {run.select_best!r} selects by the eval split, and "
            "eval_split 'test' has no answers: use 'validation'"
        )
    if (run.eval_every is not None and run.eval_every < 1) or run.eval_every_epochs <= 0:
        raise ConfigError(
            "RunConfig.select_best needs evaluations during training: set "
            "RunConfig.eval_every (steps) or eval_every_epochs to a positive value"
        )


RUN_CONFIG_FILE = "run_config.json"  # MODEL_DIR/run_config.json: the run that made it
# What a MODEL_DIR's checkpoints are: resuming with another value is an error. Compute
# options (dtype, remat_policy) and dropout may change between sessions. The selection
# too: its scores are saved in the checkpoints from the first evaluation on.
_IDENTITY_FIELDS = (
    "task",
    "vocabulary_name",
    "max_length",
    "target_length",
    "select_best",
    "select_mode",
)
# The model-config fields that hold a dropout rate, every family's.
DROPOUT_FIELDS = (
    "hidden_dropout",
    "attention_dropout",
    "dropout_rate",
    "dropout",
    "summary_last_dropout",
    "classifier_dropout",  # ALBERT's, before the task head
    "resid_pdrop",  # GPT-2's three
    "embd_pdrop",
    "attn_pdrop",
)
_FREE_MODEL_FIELDS = ("dtype", "remat_policy", *DROPOUT_FIELDS)


def run_config_json(run: RunConfig) -> dict:
    """The RunConfig as JSON data (the model as {"family": its registry name, fields}).
    The options stay flat, as when they were RunConfig fields: every run task's option by
    its name, another task's at its default (older cmrcx reads the file; prepared-example
    stores keep their keys)."""
    family = registry.family_of(run.model).name
    options = with_task_options(run).options
    data = dataclasses.asdict(dataclasses.replace(run, options=None))
    del data["options"]
    data.update(task_options.all_option_defaults())
    data.update(dataclasses.asdict(options))
    data["model"] = {"family": family, **dataclasses.asdict(run.model)}
    data["mesh_shape"] = list(run.mesh_shape)
    data["logical_rules"] = (
        None if run.logical_rules is None else [list(r) for r in run.logical_rules]
    )
    return data


def read_run_config(model_dir: str) -> RunConfig | None:
    """The RunConfig saved in MODEL_DIR by the run that trained it; None if there is none."""
    path = os.path.join(model_dir, RUN_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        model = dict(data.pop("model"))
        model = registry.family(model.pop("family")).config_class(**model)
        rules = data.get("logical_rules")
        data["logical_rules"] = None if rules is None else tuple(tuple(r) for r in rules)
        data["mesh_shape"] = tuple(data["mesh_shape"])
        if data.get("dcn_mesh_shape") is not None:
            data["dcn_mesh_shape"] = tuple(data["dcn_mesh_shape"])
        fields = {f.name for f in dataclasses.fields(RunConfig)}
        options = {name: data.pop(name) for name in list(data) if name not in fields}
        return with_task_options(RunConfig(model=model, options=options, **data))
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{path} is unreadable ({error}); remove it to start afresh") from error


def model_differences(saved, model) -> list[tuple[str, object, object]]:
    """[(RunConfig.model.FIELD, saved value, value)] where two network configs differ in
    what the parameters mean (compute options and dropout rates may differ)."""
    if type(saved) is not type(model):
        return [("RunConfig.model", type(saved).__name__, type(model).__name__)]
    return [
        (f"RunConfig.model.{f.name}", getattr(saved, f.name), getattr(model, f.name))
        for f in dataclasses.fields(model)
        if f.name not in _FREE_MODEL_FIELDS and getattr(saved, f.name) != getattr(model, f.name)
    ]


def check_same_run(saved: RunConfig, run: RunConfig, model_dir: str) -> None:
    """ConfigError naming the field if `run` cannot continue the checkpoints of `saved`."""
    differences = [
        (f"RunConfig.{name}", getattr(saved, name), getattr(run, name))
        for name in _IDENTITY_FIELDS
        if getattr(saved, name) != getattr(run, name)
    ]
    row = CLUE_TASKS.get(run.task)
    if row is not None and row.predicted_by == saved.task:  # diagnostics by the CMNLI model
        differences = [d for d in differences if d[0] != "RunConfig.task"]
    differences += model_differences(saved.model, run.model)
    if differences:
        field, before, now = differences[0]
        raise ConfigError(
            f"MODEL_DIR {model_dir} holds a run with {field}={before!r}, this run has "
            f"{field}={now!r}"
            + (f" (and {len(differences) - 1} more)" if differences[1:] else "")
            + ": use another MODEL_DIR, or the settings it was trained with"
        )
