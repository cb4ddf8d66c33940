"""The memory check before the first step: XLA's figure for the compiled step against what
the host has, read from /proc/meminfo and the memory cgroup (v1 and v2 layouts)."""

import dataclasses
import logging
import re

import jax
import pytest
from test_preemption import flags, runner_for

from cmrcx.common.errors import ConfigError
from cmrcx.models.bert import BertConfig
from cmrcx.training import memory_check
from cmrcx.training.run_config import RunConfig

GIB = 2**30


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def meminfo(tmp_path, available_kb=20 * 2**20):
    write(
        tmp_path / "proc" / "meminfo",
        f"MemTotal:       24684084 kB\nMemFree:         1000000 kB\n"
        f"MemAvailable:   {available_kb} kB\nSwapTotal:             0 kB\n",
    )
    return str(tmp_path / "proc")


def test_available_memory_is_memavailable_without_a_cgroup_limit(tmp_path):
    proc = meminfo(tmp_path)
    cgroup = tmp_path / "cgroup"
    write(cgroup / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # v1: none
    write(cgroup / "memory" / "memory.usage_in_bytes", "331698176\n")
    assert memory_check.available_host_bytes(proc, str(cgroup)) == (
        20 * GIB,
        "MemAvailable in /proc/meminfo",
    )
    write(cgroup / "memory.max", "max\n")  # v2: none
    write(cgroup / "memory.current", "1000\n")
    assert memory_check.available_host_bytes(proc, str(cgroup))[0] == 20 * GIB


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_smaller_cgroup_limit_wins_and_its_reclaimable_cache_counts(tmp_path, version):
    proc, cgroup = meminfo(tmp_path), tmp_path / "cgroup"
    if version == "v2":
        write(cgroup / "memory.max", f"{8 * GIB}\n")
        write(cgroup / "memory.current", f"{3 * GIB}\n")
        write(cgroup / "memory.stat", f"anon {2 * GIB}\ninactive_file {GIB}\n")
    else:
        write(cgroup / "memory" / "memory.limit_in_bytes", f"{8 * GIB}\n")
        write(cgroup / "memory" / "memory.usage_in_bytes", f"{3 * GIB}\n")
        write(cgroup / "memory" / "memory.stat", f"cache 5\ntotal_inactive_file {GIB}\n")
    free, source = memory_check.available_host_bytes(proc, str(cgroup))
    assert free == 6 * GIB and "cgroup limit" in source


def test_nothing_readable_gives_none(tmp_path):
    assert memory_check.available_host_bytes(str(tmp_path), str(tmp_path)) is None


PAPER_RUN = RunConfig(batch_size=24, max_length=512, model=BertConfig())
# BERT-base at 24 x 512 in float32 (README, Compiled memory: 22.8 GiB in all).
BERT_BASE = {"state": int(1.1 * GIB), "temporaries": int(21.7 * GIB), "total": int(22.8 * GIB)}


def test_a_step_that_cannot_fit_stops_with_what_to_change():
    with pytest.raises(ConfigError) as info:
        memory_check.check(BERT_BASE, (int(22.4 * GIB), "MemAvailable in /proc/meminfo"), PAPER_RUN)
    message = str(info.value)
    assert message.startswith("the training step needs about 22.8 GiB of memory")
    assert "a run takes about 1.25x that at its peak" in message
    assert "22.4 GiB are available (MemAvailable in /proc/meminfo)" in message
    # 1.25 x (1.1 + 21.7 / 2) = 14.9 GiB is within 0.9 x 22.4: two micro-batches of 12.
    assert "--gin.RunConfig.grad_accum_steps=2 (micro-batches of 12" in message
    assert "--gin_file=precision/remat.gin" in message
    assert "RunConfig.check_memory = False" in message
    # On a 12 GiB host two are not enough; three are: 1.25 x (1.1 + 21.7 / 3) = 10.4 <= 10.8.
    with pytest.raises(ConfigError, match=r"grad_accum_steps=3 \(micro-batches of 8"):
        memory_check.check(BERT_BASE, (12 * GIB, "a test"), PAPER_RUN)
    # Already two micro-batches of 12 on a 10 GiB host: 1.25 x (1.1 + 10.85 x 2/3) = 10.4 is
    # over 9.0, 1.25 x (1.1 + 10.85 x 2/4) = 8.2 is not.
    accumulating = {**BERT_BASE, "temporaries": int(10.85 * GIB), "total": int(11.95 * GIB)}
    run = dataclasses.replace(PAPER_RUN, grad_accum_steps=2)
    with pytest.raises(ConfigError, match=r"grad_accum_steps=4 \(micro-batches of 6"):
        memory_check.check(accumulating, (10 * GIB, "a test"), run)


def test_other_families_are_told_their_remat_binding_and_remat_runs_are_not():
    @dataclasses.dataclass
    class T5Config:
        remat_policy: str = "none"

    run = dataclasses.replace(PAPER_RUN, model=T5Config())
    with pytest.raises(ConfigError, match=r"--gin.cmrcx.T5Config.remat_policy=\"'dots'\""):
        memory_check.check(BERT_BASE, (GIB, "a test"), run)
    run = dataclasses.replace(PAPER_RUN, model=BertConfig(remat_policy="dots"))
    with pytest.raises(ConfigError) as info:
        memory_check.check(BERT_BASE, (GIB, "a test"), run)
    assert "remat" not in str(info.value)


def test_a_step_that_fits_says_so_and_warns_when_the_margin_is_thin():
    fits = memory_check.check(BERT_BASE, (40 * GIB, "a test"), PAPER_RUN)
    assert fits == "it needs about 22.8 GiB of memory, 40.0 GiB are available"
    # 1.25 x 22.8 = 28.5 GiB: within 29 GiB, but over 0.9 x 29.
    tight = memory_check.check(BERT_BASE, (29 * GIB, "a test"), PAPER_RUN)
    assert tight.endswith("(little margin: other programs' memory could get the run killed)")
    anyway = dataclasses.replace(PAPER_RUN, check_memory=False)
    said = memory_check.check(BERT_BASE, (GIB, "a test"), anyway)
    assert said.endswith("(RunConfig.check_memory is False: running anyway)")
    assert memory_check.check(BERT_BASE, None, PAPER_RUN) == "it needs about 22.8 GiB of memory"


def test_a_run_stops_before_its_state_exists_when_the_step_cannot_fit(tmp_path, monkeypatch):
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (1024, "a test"))
    runner = runner_for(flags(tmp_path / "run", tmp_path / "tfds", steps=1))
    with pytest.raises(ConfigError, match=r"^the training step needs about \d+ MiB .* \(a test\)"):
        runner.train()
    assert runner.checkpoints.latest_step() is None


class XlaCompilations(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.names = []

    def emit(self, record):
        match = re.search(r"Finished XLA compilation of (jit\([^)]*\))", record.getMessage())
        if match:
            self.names.append(match.group(1))


@pytest.fixture
def xla_compilations():
    handler, logger = XlaCompilations(), logging.getLogger("jax")
    logger.addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    yield handler.names
    jax.config.update("jax_log_compiles", False)
    logger.removeHandler(handler)


def test_the_step_compiles_once_before_the_first_step_which_reuses_it(
    tmp_path, capsys, xla_compilations
):
    runner = runner_for(flags(tmp_path / "run", tmp_path / "tfds", steps=2))
    state, _ = runner.train()
    assert int(state.step) == 2
    assert xla_compilations.count("jit(_train_step_fn)") == 1
    out = capsys.readouterr().out
    before, after = out.index("compiling the training step"), out.index("training step compiled")
    assert before < after
    assert re.search(
        r"training step compiled in [\d.]+ s: it needs about [\d.]+ [GM]iB of memory, "
        r"[\d.]+ GiB are available",
        out,
    )
    needed = memory_check.step_bytes(runner.trainer.compile_train_step())
    assert 0 < needed["state"] < needed["total"]
