"""One comparison: N steps of cmrcx against the benchmark's reference recipe, per step.

`check_reproduction(run, steps)` returns the rows (step, learning rate, cmrcx loss,
reference loss, relative difference) and a verdict; `table` and `report_json` print them.
A run's task and model family pick the recipe (`recipe_for`, before anything runs); a
task, family or optimizer without one is a ConfigError naming those that have one.
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import NamedTuple

import numpy as np

from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_CLASSIFICATION
from cmrcx.common.errors import ConfigError
from cmrcx.reproduction import (
    clue_classifier,
    clue_mrc,
    clue_multichoice,
    cmrc2019,
    cmrcx_steps,
    lot_causal_generation,
    lot_generation,
    lot_pointer,
    lot_understanding,
    recipe_updates,
)
from cmrcx.reproduction.reference_imports import torch_and_transformers
from cmrcx.training.run_config import RunConfig

# float32 on CPU: the two frameworks sum in different orders; differences stay near
# 1e-6 at tiny sizes (tests/reproduction) and grow with depth and steps.
DEFAULT_TOLERANCE = 1e-4


class Row(NamedTuple):
    step: int
    learning_rate: float
    loss: float
    reference_loss: float
    relative_difference: float


class Comparison(NamedTuple):
    rows: list[Row]
    max_relative_difference: float
    verdict: str  # "same" | "different"
    learning_rates_differ: list[int]  # steps whose learning rates differ
    cmrcx: cmrcx_steps.CmrcxSteps
    reference: object  # the recipe's run (its model and what it recorded)


def relative_difference(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


# The LOT tasks with a recipe, by model family: the paper's candidate pointer for ClozeT
# and SenPos under the LongLM authors' finetune.py optimizer (every Table 10 family;
# lot_pointer), their finetune.py itself (ClozeT, their layout; lot_understanding), and
# finetune_trainer.py for generation (T5: LongLM, mT5, lot_generation; GPT-2 on prompt ->
# continuation, lot_causal_generation). Another family is refused by name (`lot_recipe`).
GENERATION = {
    "t5": lot_generation.GenerationRecipe,
    "gpt2": lot_causal_generation.CausalGenerationRecipe,
}
LOT_RECIPES = {
    "lot_clozet": dict.fromkeys(lot_pointer.FAMILIES, lot_pointer.PointerRecipe),
    "lot_senpos": dict.fromkeys(lot_pointer.FAMILIES, lot_pointer.PointerRecipe),
    "lot_clozet_longlm_authors": {"t5": lot_understanding.ClozeTAuthorsRecipe},
    "lot_outgen": GENERATION,
    "lot_plotcom": GENERATION,
}


def lot_recipe(run: RunConfig):
    """The recipe class of a LOT run; ConfigError when its family has none."""
    from cmrcx.models import registry

    recipes = LOT_RECIPES[run.task]
    family = registry.family_of(run.model).name
    if family not in recipes:
        raise ConfigError(
            f"no reference recipe for {run.task} with the {family} family: its recipes "
            f"train {', '.join(recipes)}"
        )
    return recipes[family]


# The CLUE multiple-choice tasks: run_c3.py and run_multichoice_mrc.py (ChID);
# cmrcx.reproduction.clue_multichoice.
MULTIPLE_CHOICE_TASKS = ("clue_c310", "clue_c311", "clue_chid10", "clue_chid11")


# CMRC 2019: the authors' run_cmrc2019_baseline.py for a gin with runs/released_script.gin
# (run from --reference_dir), the paper setting otherwise (cmrcx.reproduction.cmrc2019).
CMRC2019_TASKS = ("cmrc2019",)

# CLUE's reading-comprehension tasks with a recipe: run_mrc.py (cmrcx.reproduction.clue_mrc).
CLUE_MRC_RECIPES = {"clue_cmrc2018": clue_mrc.ClueMrcRecipe}


def supported_tasks() -> list[str]:
    classification = CLUE_CLASSIFICATION.keys() - {"clue_diagnostics"}
    return sorted(
        classification
        | LOT_RECIPES.keys()
        | set(MULTIPLE_CHOICE_TASKS)
        | set(CMRC2019_TASKS)
        | CLUE_MRC_RECIPES.keys()
    )


# The CLUE recipes' families: the cmrcx families each runs (the model's registry row).
CLUE_FAMILIES = {
    "classification": clue_classifier.FAMILIES,
    "multiple choice": clue_multichoice.FAMILIES,
    "reading comprehension": clue_mrc.FAMILIES,
}


def _with_family(run: RunConfig, recipe, families, name: str):
    """`recipe` when the run's model family is one of `families`; ConfigError otherwise."""
    from cmrcx.models import registry

    family = registry.family_of(run.model).name
    if family not in families:
        raise ConfigError(
            f"no reference recipe for {run.task} with the {family} family: the {name} "
            f"recipe trains {', '.join(families)}"
        )
    return recipe


def recipe_for(run: RunConfig, reference_dir: str | None = None):
    """The recipe factory of a run ((cmrcx steps, HF folder) -> the recipe), chosen by its
    task and model family; runs nothing. ConfigError for a task or a family without one."""
    if run.task not in supported_tasks():
        raise ConfigError(
            f"no reference recipe for {run.task} yet: check_reproduction supports "
            f"{', '.join(supported_tasks())} (CLUE's classifier_pytorch/run_classifier.py, "
            "mrc_pytorch/run_mrc.py, run_c3.py and run_multichoice_mrc.py; the LongLM "
            "authors' finetune.py and finetune_trainer.py; CMRC 2019's "
            "run_cmrc2019_baseline.py and its paper setting)"
        )
    if run.task in LOT_RECIPES:
        return lot_recipe(run)
    if run.task in CMRC2019_TASKS:
        recipe = functools.partial(cmrc2019.recipe, reference_dir=reference_dir)
        return _with_family(run, recipe, cmrc2019.FAMILIES, "CMRC 2019")
    if run.task in MULTIPLE_CHOICE_TASKS:
        group, recipe = "multiple choice", ClueMultipleChoiceRecipe
        optimizers = tuple(clue_multichoice.OPTIMIZERS)
    elif run.task in CLUE_MRC_RECIPES:
        group, recipe = "reading comprehension", CLUE_MRC_RECIPES[run.task]
        optimizers = clue_mrc.OPTIMIZERS
    else:
        group, recipe = "classification", ClueClassifierRecipe
        optimizers = None  # [RUN]'s own whatever the run's (a different one: steps differ)
    if optimizers is not None and run.optimizer not in optimizers:
        raise ConfigError(
            f"RunConfig.optimizer {run.optimizer!r}: the CLUE {group} recipe compares "
            f"{' or '.join(optimizers)}"
        )
    return _with_family(run, recipe, CLUE_FAMILIES[group], f"CLUE {group}")


def check_reproduction(
    run: RunConfig,
    steps: int,
    tolerance: float = DEFAULT_TOLERANCE,
    work_dir: str | None = None,
    reference_dir: str | None = None,
) -> Comparison:
    """Runs `steps` steps of `run` in cmrcx and in its recipe; compares them per step.

    The verdict is "same" when every step's rates agree and its losses differ by at most
    `tolerance` (relative). work_dir: where both sides write (cmrcx/: the run's
    MODEL_DIR, reference/: the HuggingFace copy of the weights); a temporary folder,
    removed afterwards, when None. reference_dir: the authors' released code, for a
    recipe that runs it (CMRC 2019's released script; else $CMRCX_CMRC2019_REFERENCE).
    """
    recipe = recipe_for(run, reference_dir)  # a refused task or family: said first
    if steps < 1:
        raise ConfigError(f"--steps {steps}: give at least 1")
    torch_and_transformers()  # missing: said now, before the cmrcx side runs
    if run.task in CMRC2019_TASKS and run.optimizer == "released_script":
        cmrc2019.reference_dir_of(reference_dir)  # missing: said now, too
    if work_dir is None:
        with tempfile.TemporaryDirectory() as scratch:
            return check_reproduction(run, steps, tolerance, scratch, reference_dir)
    ours = cmrcx_steps.run_steps(
        cmrcx_steps.comparison_run(run, os.path.join(work_dir, "cmrcx")), steps
    )
    reference = recipe(ours, os.path.join(work_dir, "reference"))
    recorded = reference.train(ours.batches)
    rows = [
        Row(i + 1, ours.learning_rates[i], ours.losses[i], recorded.losses[i],
            relative_difference(ours.losses[i], recorded.losses[i]))
        for i in range(steps)
    ]  # fmt: skip
    rates_differ = [
        row.step
        for row, rate in zip(rows, recorded.learning_rates, strict=True)
        if relative_difference(row.learning_rate, rate) > 1e-6
    ]
    worst = max(row.relative_difference for row in rows)
    verdict = "same" if worst <= tolerance and not rates_differ else "different"
    return Comparison(rows, worst, verdict, rates_differ, ours, reference)


def recipe_hyper(run: RunConfig, t_total: int) -> dict:
    """The CLUE recipes' hyper-parameters (clue_classifier.train_steps') from a run."""
    return {
        "learning_rate": run.learning_rate,
        "weight_decay": run.weight_decay,
        "adam_epsilon": run.adam_epsilon,
        "max_grad_norm": run.max_grad_norm,
        "warmup_proportion": run.warmup_fraction,
        "t_total": t_total,
    }


def _cmrcx_framed(run: RunConfig) -> bool:
    """Whether the run's family is one the CLUE recipes take the rows of from cmrcx's
    batches (`clue_classifier.CMRCX_FRAMED`: XLNet)."""
    from cmrcx.models import registry

    return registry.family_of(run.model).name in clue_classifier.CMRCX_FRAMED


def _framed_here(recipe) -> None:
    if recipe.cmrcx_framed:
        raise ConfigError(
            f"{recipe.run.task}: the recipe's predictions are of the families it encodes "
            "itself; XLNet's rows are cmrcx's (its training steps are compared)"
        )


class ClueClassifierRecipe:
    """The CLUE classification recipe (`clue_classifier`) set up from a cmrcx run.

    XLNet: what is the recipe's is the model class of transformers the run's head equals
    (XLNetForSequenceClassification: the sequence summary of the last token, <cls>, then
    logits_proj), its loss and [RUN]'s optimizer and schedule (the run's: CLUE trained
    XLNet with XLNet's TF scripts, whose AdamW, warm-up and clipping the paper setting's
    transformers2_adamw steps match, with their weight-decay exclusions,
    recipe_updates.XLNET_NO_DECAY); what is the family's, the input framing (`a <sep> b
    <sep> <cls>`, left padded, segments 0/1/2), is cmrcx's own: the recipe is fed
    cmrcx's rows (`clue_classifier.batch_features`), not an encoding of its own.
    """

    def __init__(self, ours: cmrcx_steps.CmrcxSteps, hf_dir: str):
        run = ours.runner.run
        self.run, self.row = run, CLUE_CLASSIFICATION[run.task]
        self.cmrcx_framed = _cmrcx_framed(run)
        if not self.cmrcx_framed:
            self.tokenizer = clue_classifier.tokenizer_for(run.vocab_file, run.lower_case)
            self.train_features = self.features(run.train_split)
        self.model = clue_classifier.reference_classifier(
            run.model,
            ours.initial_params,
            ours.runner.model.encoder_name,
            self.row.num_classes,
            hf_dir,
        )

    def features(self, split: str) -> clue_classifier.Features:
        path = os.path.join(self.run.data_dir, self.row.split_files[split])
        return clue_classifier.recipe_features(
            self.row.dataset, path, self.tokenizer, self.run.max_length
        )

    def train(self, batches) -> recipe_updates.RecipeRun:
        """The recipe's steps over cmrcx's batches (each row matched to the recipe's own
        encoding of its record first)."""
        run = self.run
        hyper = {}
        if self.cmrcx_framed:
            self.train_features = clue_classifier.batch_features(batches)
            path = os.path.join(run.data_dir, self.row.split_files[run.train_split])
            records = clue_classifier.labelled_records(self.row.dataset, path)
            hyper["no_decay"] = recipe_updates.XLNET_NO_DECAY
        else:
            records = len(self.train_features.labels)
        rows = clue_classifier.match_rows(batches, self.train_features)
        total = clue_classifier.t_total(
            records, run.batch_size, run.num_epochs, run.num_train_steps
        )
        return clue_classifier.train_steps(
            self.model, self.train_features, rows, {**recipe_hyper(run, total), **hyper}
        )

    def predictions(self, split: str) -> tuple[list[str], float]:
        """(predicted label strings in file order, accuracy) of the model on a labelled
        split ([RUN] evaluate())."""
        _framed_here(self)
        features = self.features(split)
        predicted = clue_classifier.predict(self.model, features, self.run.eval_batch_size)
        labels = [self.row.labels[i] for i in predicted]
        return labels, float((predicted == features.labels).mean())


class ClueMultipleChoiceRecipe:
    """The CLUE multiple-choice recipe (`clue_multichoice`: C3, ChID) set up from a cmrcx
    run, its optimizer the run's (`clue_multichoice.OPTIMIZERS`).

    XLNet: the recipe's model class is XLNetForMultipleChoice (each choice's sequence
    summary, logits_proj to one score), with its loss and the run's optimizer (XLNet's
    weight-decay exclusions, recipe_updates.XLNET_NO_DECAY); the input framing is the
    family's as cmrcx builds it (c3.question_features, chid.blank_features framed by
    the XLNet layout: CLUE ran XLNet on C3 and ChID with XLNet's TF code), so the recipe
    is fed cmrcx's rows (`clue_classifier.batch_features`), as ClueClassifierRecipe's.
    """

    def __init__(self, ours: cmrcx_steps.CmrcxSteps, hf_dir: str):
        run = self.run = ours.runner.run
        self.is_c3 = run.task.startswith("clue_c3")
        self.cmrcx_framed = _cmrcx_framed(run)
        if not self.cmrcx_framed:
            self.tokenizer = clue_classifier.tokenizer_for(run.vocab_file, run.lower_case)
            self.train_features = self.features(run.train_split)
        self.model = clue_multichoice.reference_model(
            run.model, ours.initial_params, ours.runner.model.encoder_name, hf_dir
        )

    def features(self, split: str) -> clue_multichoice.Features:
        paths = clue_multichoice.split_paths(self.run.task, self.run.data_dir, split)
        if self.is_c3:
            return clue_multichoice.c3_features(paths, self.tokenizer, self.run.max_length)
        return clue_multichoice.chid_features(*paths, self.tokenizer, self.run.max_length)

    def train(self, batches) -> recipe_updates.RecipeRun:
        """The recipe's steps over cmrcx's batches (each row matched to the recipe's own
        encoding of its question or blank first). t_total: num_train_steps, else run_c3.py's
        and run_multichoice_mrc.py's int(examples / batch * epochs)."""
        run = self.run
        hyper = {"gradient_accumulation_steps": run.grad_accum_steps}
        if self.cmrcx_framed:
            self.train_features = clue_classifier.batch_features(batches, clue_multichoice.Features)
            paths = clue_multichoice.split_paths(run.task, run.data_dir, run.train_split)
            examples = clue_multichoice.examples(run.task, paths)
            hyper["no_decay"] = recipe_updates.XLNET_NO_DECAY
        else:
            examples = len(self.train_features.labels)
        rows = clue_classifier.match_rows(batches, self.train_features)
        total = run.num_train_steps or int(examples / run.batch_size * run.num_epochs)
        hyper = {**recipe_hyper(run, total), **hyper}
        return clue_multichoice.train_steps(
            self.model, self.train_features, rows, hyper, run.optimizer
        )

    def predictions(self, split: str):
        """C3: (argmax per question in file order, accuracy); ChID: ({tag: candidate} of
        the global greedy decoding, accuracy over the blanks)."""
        _framed_here(self)
        features = self.features(split)
        scores = clue_multichoice.logits(self.model, features, self.run.eval_batch_size)
        if self.is_c3:
            predicted = scores.argmax(axis=1)
            return predicted.tolist(), float((predicted == features.labels).mean())
        decoded = clue_multichoice.chid_decode(features, scores)
        labels = zip(features.tag, features.labels, strict=True)
        return decoded, float(np.mean([decoded[tag] == label for tag, label in labels]))


def table(comparison: Comparison, tolerance: float = DEFAULT_TOLERANCE) -> str:
    """The human report: a row per step, then the verdict."""
    lines = [f"{'step':>5}  {'learning_rate':>13}  {'loss':>12}  {'reference':>12}  rel.diff"]
    for row in comparison.rows:
        lines.append(
            f"{row.step:>5}  {row.learning_rate:>13.6e}  {row.loss:>12.7f}  "
            f"{row.reference_loss:>12.7f}  {row.relative_difference:.2e}"
        )
    said = f"max relative difference {comparison.max_relative_difference:.2e}"
    if comparison.learning_rates_differ:
        steps = ", ".join(map(str, comparison.learning_rates_differ))
        said += f"; the learning rates differ at steps {steps}"
    lines.append(f"verdict: {comparison.verdict} ({said}; tolerance {tolerance:g})")
    return "\n".join(lines)


def report_json(comparison: Comparison) -> dict:
    """{"rows": [{"step", "learning_rate", "loss", "reference_loss",
    "relative_difference"}, ...], "max_relative_difference", "verdict"}."""
    return {
        "rows": [row._asdict() for row in comparison.rows],
        "max_relative_difference": comparison.max_relative_difference,
        "verdict": comparison.verdict,
    }
