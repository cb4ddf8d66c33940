"""One compilation per distinct shape: 20 train steps and a full evaluation pass.

Fixed window length and batch size, and an eval whose last batch is padded
rather than short, mean the train step and the scoring step each compile
exactly once; JAX's compile log (jax_log_compiles) is the witness.
"""

import logging
import re
from collections import Counter

import gin
import jax
import pytest

from cmrcx.training import input_pipeline

# (function, argument shapes, argument shardings): an eager op on a committed and on an
# uncommitted scalar is two programs, not one recompiled.
COMPILING = re.compile(
    r"Compiling (jit\([^)]*\)) with global shapes and types (.*?)\. Argument mapping: (.*)"
)


class CompileLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.compiled = Counter()  # (function, shapes, shardings) -> compilations

    def emit(self, record):
        match = COMPILING.search(record.getMessage())
        if match:
            self.compiled[match.groups()] += 1

    def count(self, function: str) -> int:
        return sum(n for (name, *_), n in self.compiled.items() if name == f"jit({function})")


@pytest.fixture
def compile_log():
    handler = CompileLog()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    yield handler
    jax.config.update("jax_log_compiles", False)
    logger.removeHandler(handler)


def test_each_shape_compiles_once(compile_log, tiny_runner, tmp_path):
    runner = tiny_runner(
        "cmrc2019_tiny.gin",
        "RunConfig.num_train_steps = 20",
        "RunConfig.log_every = 5",
        "RunConfig.save_every = 10",
        "RunConfig.eval_batch_size = 8",  # several eval batches, the last one padded
        model_dir=tmp_path,
    )
    gin.clear_config()
    state, _ = runner.train()
    runner.evaluate(state, 20)
    windows = input_pipeline.count_examples(runner.score_task, "validation")
    assert windows > 8 and windows % 8, windows  # really several batches, the last padded
    assert runner.trainer._score_step._cache_size() == 1
    assert compile_log.count("_train_step_fn") == 1
    assert compile_log.count("score_batch") == 1
    repeated = {key: n for key, n in compile_log.compiled.items() if n > 1}
    assert not repeated, f"compiled more than once for the same shapes: {repeated}"
