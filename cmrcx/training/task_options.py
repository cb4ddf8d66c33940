"""Each run task's own options, as a dataclass that checks them: what CMRC 2019, the CLUE
reading tasks, LongLM pretraining, LOT generation and the LOT mixture have beyond what
every run has (`RunConfig`).

A run task names its class (`RunTask.options_class`, `cmrcx.training.run_tasks`); a run
holds its task's in `RunConfig.options`. gin binds an option by its own name on RunConfig
(`RunConfig.decoding = "assignment"`, `cmrcx.cli.launch`), and MODEL_DIR/run_config.json
keeps every option by that name, so gin files and saved runs read as before. This module
imports no TensorFlow, JAX or SeqIO: the entry points build gin's RunConfig from
`OPTIONS_CLASSES` before TensorFlow is set up.

Adding an option: a field (with its comment) in the task's class, its check in the
class's `checked`; adding a run task's options: a class here, in `OPTIONS_CLASSES`, named
by the run task's `options_class`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from cmrcx.benchmarks.cmrc2019.evaluation import DECODING_MODES
from cmrcx.common.errors import ConfigError, raise_first
from cmrcx.common.paths import resolve_path


def check_choice(name: str, value: str, choices: Iterable[str]) -> None:
    """ConfigError ``RunConfig.NAME 'x': use one of a, b, c`` unless value is a choice."""
    if value not in choices:
        raise ConfigError(f"RunConfig.{name} {value!r}: use one of {', '.join(choices)}")


@dataclasses.dataclass
class TaskOptions:
    """A run task's own options (none here: CLUE classification, LOT understanding).

    A task ignores an option it does not own (local_tiny.gin binds CMRC 2019's doc_stride
    for every task, as the flat RunConfig let it), unless the owner's `stray_message`
    refuses it.
    """

    def checked(self, run) -> TaskOptions:
        """The options, paths resolved; ConfigError naming the first bad one. `run`: the
        RunConfig they belong to (for limits such as its target_length)."""
        return self

    @classmethod
    def stray_message(cls, name: str, value, task: str) -> str | None:
        """The ConfigError text when the run task `task`, which does not own this class's
        option `name`, is given `value` for it; None: the value is ignored."""
        return None


@dataclasses.dataclass
class Cmrc2019Options(TaskOptions):
    """CMRC 2019's options (runs/cmrc2019_finetune.gin)."""

    doc_stride: int = 128  # window stride (authors' baseline default)
    max_candidate_tokens: int = 64  # candidate sentences are capped at this
    # The mode written to predictions/: paper | baseline | assignment (all are scored).
    decoding: str = "paper"

    def checked(self, run) -> Cmrc2019Options:
        check_choice("decoding", self.decoding, DECODING_MODES)
        return self


@dataclasses.dataclass
class ClueReadingOptions(TaskOptions):
    """The CLUE reading tasks' options: CMRC 2018's windows, ChID's decoding."""

    doc_stride: int = 128  # CMRC 2018 window stride (CLUE's run_mrc.py)
    # ChID: the CMRC 2019 mode name of the decoding written (run_tasks.clue.CHID_DECODING).
    decoding: str = "paper"

    def checked(self, run) -> ClueReadingOptions:
        check_choice("decoding", self.decoding, DECODING_MODES)
        return self


@dataclasses.dataclass
class LongLMOptions(TaskOptions):
    """LongLM pretraining's options (runs/longlm_pretrain.gin)."""

    validation_data_dir: str | None = None  # folder of held-out .txt texts
    max_decoded_examples: int = 16  # BLEU: texts decoded per objective (paper: 1,000)

    def checked(self, run) -> LongLMOptions:
        return dataclasses.replace(self, validation_data_dir=resolve_path(self.validation_data_dir))


GENERATION_METHODS = ("greedy", "sample")  # RunConfig.generation_method


@dataclasses.dataclass
class LotGenerationOptions(TaskOptions):
    """How PlotCom and OutGen generate every evaluation example (LOT paper section 5.2:
    top-k sampling, k 40, temperature 0.7; runs/lot_generation_finetune.gin)."""

    generation_method: str = "sample"  # greedy | sample
    generation_top_k: int = 40  # sample among the k most likely tokens; 0: all
    generation_temperature: float = 0.7  # logits / temperature before sampling
    generation_max_new_tokens: int | None = None  # EOS included; None: target_length
    # The decoder's first input when generating (transformers' generate(decoder_start_token_id=
    # ...); the authors' gen.py: 1). None: the model's decoder_start_token_id, the one
    # teacher forcing shifts with.
    generation_start_token_id: int | None = None
    generation_seed: int = 0  # example i samples with fold_in(key(seed), i)
    # gen.py's slip: without "</s>" its clean-up drops the last character (compat only).
    drop_last_char_without_eos: bool = False

    def checked(self, run) -> LotGenerationOptions:
        """ConfigError naming the first bad generation setting."""
        max_new = self.generation_max_new_tokens
        problems = [
            (self.generation_method not in GENERATION_METHODS,
             f"generation_method {self.generation_method!r}: use one of "
             + ", ".join(GENERATION_METHODS)),
            (self.generation_top_k < 0, f"generation_top_k {self.generation_top_k} < 0"),
            (not self.generation_temperature > 0,
             f"generation_temperature {self.generation_temperature} is not positive"),
            (max_new is not None and not 1 <= max_new <= run.target_length,
             f"generation_max_new_tokens {max_new}: use 1 to target_length {run.target_length}"),
        ]  # fmt: skip
        raise_first(problems, "RunConfig.")
        return self


# The `lot` mixture (RunConfig.task "lot", cmrcx.tasks.lot.mixture) and its tasks.
LOT_MIXTURE_TASK = "lot"
LOT_MIXTURE_ROWS = ("lot_clozet", "lot_senpos", "lot_plotcom", "lot_outgen")


@dataclasses.dataclass
class LotMixtureOptions(LotGenerationOptions):
    """The `lot` mixture's options: LOT generation's (its PlotCom and OutGen rows generate
    the same way) and the mixing rates (runs/lot_mixture_finetune.gin)."""

    # {"lot_clozet": r, "lot_senpos": r, "lot_plotcom": r, "lot_outgen": r}, every task
    # named, 0 leaves one out of training. None: T5's "proportional", each task's rate its
    # number of training examples.
    mixture_rates: dict | None = None

    def checked(self, run) -> LotMixtureOptions:
        super().checked(run)
        if self.mixture_rates is not None:
            _check_mixture_rates(self.mixture_rates)
        return self

    @classmethod
    def stray_message(cls, name: str, value, task: str) -> str | None:
        if name != "mixture_rates" or value is None:
            return None  # the generation options: tasks that do not generate ignore them
        return (
            f"RunConfig.mixture_rates is for the task {LOT_MIXTURE_TASK!r} (the LOT "
            f"mixture); {task} is one task"
        )


def _check_mixture_rates(rates) -> None:
    """ConfigError for rates that are not a rate >= 0 for each task of the `lot` mixture."""
    try:
        rates = dict(rates)
    except (TypeError, ValueError):
        raise ConfigError(
            f"RunConfig.mixture_rates {rates!r}: give a dict, e.g. {{'lot_clozet': 1.0, ...}}"
        ) from None
    names = ", ".join(LOT_MIXTURE_ROWS)
    if set(rates) != set(LOT_MIXTURE_ROWS):
        raise ConfigError(f"RunConfig.mixture_rates {rates!r}: name each of {names} once")
    for task, rate in rates.items():
        if (
            isinstance(rate, bool)
            or not isinstance(rate, int | float)
            or not 0 <= rate < float("inf")
        ):
            raise ConfigError(
                f"RunConfig.mixture_rates[{task!r}] = {rate!r}: use a finite number >= 0"
            )
    if not any(rates.values()):
        raise ConfigError("RunConfig.mixture_rates are all 0: nothing to train on")


# Every run task's options class: gin's RunConfig takes each one's fields by name.
OPTIONS_CLASSES = (
    TaskOptions,
    Cmrc2019Options,
    ClueReadingOptions,
    LongLMOptions,
    LotGenerationOptions,
    LotMixtureOptions,
)


def option_names(options_class: type[TaskOptions]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(options_class))


def all_option_defaults() -> dict[str, object]:
    """{option: default} of every class's options (a name shared by two, e.g. doc_stride,
    has the same default in both), in the order of OPTIONS_CLASSES."""
    defaults = {}
    for options_class in OPTIONS_CLASSES:
        for field in dataclasses.fields(options_class):
            defaults.setdefault(field.name, field.default)
    return defaults


def task_options(options_class: type[TaskOptions], given, task: str) -> TaskOptions:
    """`given` as the options of the run task `task` (whose class is `options_class`):
    itself when of that class; else that class from `given` as flat values
    ({"decoding": "assignment"}: what gin binds, what run_config.json holds), another
    class's options, or None (the defaults). Options the task does not own are left out,
    or refused with the owner's `stray_message`."""
    if type(given) is options_class:
        return given
    if dataclasses.is_dataclass(given):
        given = dataclasses.asdict(given)
    given = dict(given or {})
    own = option_names(options_class)
    for name, value in given.items():
        if name in own:
            continue
        owners = [c for c in OPTIONS_CLASSES if name in option_names(c)]
        if not owners:
            raise ConfigError(f"RunConfig has no option {name!r}")
        message = owners[0].stray_message(name, value, task)
        if message is not None:
            raise ConfigError(message)
    return options_class(**{name: value for name, value in given.items() if name in own})
