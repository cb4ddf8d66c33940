"""The memory check before the first step: XLA's figure for the compiled step against what
the host has, read from /proc/meminfo and the process's memory cgroup (v1 and v2 layouts);
the advice sized by compiling the step again; one compilation when the step fits."""

import dataclasses
import logging
import re

import jax
import numpy as np
import pytest

from cmrcx.common.errors import ConfigError
from cmrcx.models.bert import BertConfig
from cmrcx.training import memory_check
from cmrcx.training.run_config import RunConfig
from tests.training.test_preemption import flags, runner_for

GIB = 2**30
# One step count for the tiny AFQMC runs that train at length 32: the learning-rate
# schedule is part of the compiled step, so they share one program (the compile cache
# serves it) and one prepared TFDS cache (`afqmc_tfds`).
STEPS = 2


@pytest.fixture(scope="module")
def afqmc_tfds(tmp_path_factory):
    return tmp_path_factory.mktemp("tfds")


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
    write(tmp_path / "proc" / "self" / "cgroup", "4:memory:/process_api/abc\n0::/\n")
    cgroup = tmp_path / "cgroup"
    unlimited = "9223372036854771712\n"  # v1's "no limit"
    for folder in (cgroup / "memory", cgroup / "memory" / "process_api" / "abc"):
        write(folder / "memory.limit_in_bytes", unlimited)
        write(folder / "memory.usage_in_bytes", "331698176\n")
    write(cgroup / "memory.max", "max\n")  # v2: none
    write(cgroup / "memory.current", "1000\n")
    assert memory_check.available_host_bytes(proc, str(cgroup)) == (
        20 * GIB,
        "MemAvailable in /proc/meminfo",
    )


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_process_own_cgroup_limit_wins_and_its_reclaimable_cache_counts(tmp_path, version):
    """The limit sits on the process's nested cgroup (a Slurm job, systemd-run), not on the
    mount's root; an ancestor's looser limit does not hide it."""
    proc, cgroup = meminfo(tmp_path), tmp_path / "cgroup"
    if version == "v2":
        write(tmp_path / "proc" / "self" / "cgroup", "0::/system.slice/job42\n")
        job, parent = cgroup / "system.slice" / "job42", cgroup / "system.slice"
        files = ("memory.max", "memory.current", "memory.stat", "inactive_file")
    else:
        write(tmp_path / "proc" / "self" / "cgroup", "5:cpu:/\n4:memory:/slurm/job42\n")
        job, parent = cgroup / "memory" / "slurm" / "job42", cgroup / "memory" / "slurm"
        files = (
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "memory.stat",
            "total_inactive_file",
        )
    limit, usage, stat, inactive = files
    write(job / limit, f"{8 * GIB}\n")
    write(job / usage, f"{3 * GIB}\n")
    write(job / stat, f"anon {2 * GIB}\n{inactive} {GIB}\n")
    write(parent / limit, f"{16 * GIB}\n")
    write(parent / usage, f"{3 * GIB}\n")
    free, source = memory_check.available_host_bytes(proc, str(cgroup))
    assert free == 6 * GIB  # 8 - 3 + 1
    assert source == f"the memory cgroup limit {job / limit}"


def test_nothing_readable_gives_none(tmp_path):
    assert memory_check.available_host_bytes(str(tmp_path), str(tmp_path)) is None


PAPER_RUN = RunConfig(batch_size=24, max_length=512, model=BertConfig())
# BERT-base at 24 x 512 in float32 (22.8 GiB before the layers were unrolled; now
# docs/performance.md, Memory).
BERT_BASE = {"state": int(1.1 * GIB), "temporaries": int(21.7 * GIB), "total": int(22.8 * GIB)}
HOST = (int(22.4 * GIB), "MemAvailable in /proc/meminfo")


def test_the_message_gives_the_figures_and_what_to_change():
    message = memory_check.too_big_message(
        BERT_BASE, HOST, PAPER_RUN, (24, 512), (2, int(12.7 * GIB))
    )
    assert message.startswith("the training step needs about 22.8 GiB of memory")
    assert "1.1 GiB of state and batch, 21.7 GiB of temporaries for batch 24 x 512)" in message
    assert "a run peaks near 1.3x that, 29.6 GiB, and 22.4 GiB are available" in message
    assert "(MemAvailable in /proc/meminfo): the kernel would kill the run" in message
    assert (
        "--gin.RunConfig.grad_accum_steps=2 (micro-batches of 12, the same examples per "
        "update; XLA's figure for it: 12.7 GiB)" in message
    )
    assert "--gin_file=precision/remat.gin" in message
    assert "RunConfig.check_memory = False" in message
    # No accumulation fits; a multiple-choice batch is named by its largest array.
    message = memory_check.too_big_message(BERT_BASE, HOST, PAPER_RUN, (24, 4, 512), None)
    assert "grad_accum_steps" not in message and "for batch 24 x 4 x 512)" in message


def test_other_families_are_told_their_remat_binding_and_remat_runs_are_not():
    @dataclasses.dataclass
    class T5Config:
        remat_policy: str = "none"

    run = dataclasses.replace(PAPER_RUN, model=T5Config())
    message = memory_check.too_big_message(BERT_BASE, HOST, run, (24, 512), None)
    assert "--gin.cmrcx.T5Config.remat_policy=\"'dots'\"" in message
    run = dataclasses.replace(PAPER_RUN, model=BertConfig(remat_policy="dots"))
    assert "remat" not in memory_check.too_big_message(BERT_BASE, HOST, run, (24, 512), None)


def test_a_step_that_fits_says_so_and_warns_when_the_margin_is_thin():
    assert not memory_check.fits(BERT_BASE, HOST)
    roomy = (40 * GIB, "a test")
    assert memory_check.fits(BERT_BASE, roomy)
    said = memory_check.describe(BERT_BASE, roomy)
    assert said == "it needs about 22.8 GiB of memory, 40.0 GiB are available"
    tight = (31 * GIB, "a test")  # 1.3 x 22.8 = 29.6 GiB: within 31, but over 0.9 x 31
    assert memory_check.fits(BERT_BASE, tight)
    assert memory_check.describe(BERT_BASE, tight).endswith(
        "(little margin: other programs' memory could get the run killed)"
    )
    anyway = memory_check.describe(BERT_BASE, HOST)  # reached with check_memory off
    assert anyway.endswith("(RunConfig.check_memory is False: running anyway)")
    assert memory_check.describe(BERT_BASE, None) == "it needs about 22.8 GiB of memory"


class FakeTrainer:
    """Steps whose XLA figure is `figures[k]` GiB at k micro-batches."""

    def __init__(self, figures, k=1):
        self.figures, self.k, self.compiled = figures, k, []
        self.mesh = type("Mesh", (), {"shape": {"data": 1}})()

    def with_grad_accum_steps(self, k):
        other = FakeTrainer(self.figures, k)
        other.compiled = self.compiled  # one log of the compilations
        return other

    def compile_train_step(self):
        self.compiled.append(self.k)
        total = int(self.figures[self.k] * GIB)
        stats = type(
            "Stats",
            (),
            dict(
                argument_size_in_bytes=int(1.1 * GIB),
                output_size_in_bytes=0,
                alias_size_in_bytes=0,
                temp_size_in_bytes=total - int(1.1 * GIB),
            ),
        )()
        return type("Compiled", (), {"memory_analysis": lambda self: stats})()


def test_the_advice_is_the_fewest_micro_batches_whose_compiled_step_fits(capsys):
    # 24 GiB host: fits when 1.3 x figure <= 0.9 x 24 = 21.6, i.e. figure <= 16.6 GiB.
    host = (24 * GIB, "a test")
    # k = 2's lower bound, 1.1 + 21.7 / 2 = 12.0, passes, but its real figure (17.0: the
    # gradient buffers do not shrink) does not; k = 3 fits.
    trainer = FakeTrainer({2: 17.0, 3: 12.5, 4: 10.0})
    found = memory_check.fewest_micro_batches(trainer, PAPER_RUN, BERT_BASE, host, 1, True)
    assert found == (3, int(12.5 * GIB))
    assert trainer.compiled == [2, 3]
    assert "sizing the step with grad_accum_steps=2 ..." in capsys.readouterr().out
    # On a 12 GiB host (figure <= 8.3), k = 2 and 3 fail their lower bound uncompiled.
    small = (12 * GIB, "a test")
    trainer = FakeTrainer({4: 8.0})
    assert memory_check.fewest_micro_batches(trainer, PAPER_RUN, BERT_BASE, small, 1, False) == (
        4,
        8 * GIB,
    )
    assert trainer.compiled == [4]
    # Nothing fits a 2 GiB host: no compilation at all.
    trainer = FakeTrainer({})
    assert (
        memory_check.fewest_micro_batches(
            trainer, PAPER_RUN, BERT_BASE, (2 * GIB, "a test"), 1, False
        )
        is None
    )
    assert trainer.compiled == []


LENGTH_128 = "--gin.RunConfig.max_length=128"


def test_a_run_stops_before_its_state_exists_and_the_advice_runs(tmp_path, monkeypatch, afqmc_tfds):
    """On a host sized between the step's figure at 1 and at 2 micro-batches, the run
    stops and names grad_accum_steps=2, and the run with it trains. Length 128, where
    the activations outweigh the state: 2 micro-batches need 0.65x of 1 (at length 32,
    0.87x: too close to the 0.9 margin for every CPU's compiler)."""
    argv = [*flags(tmp_path / "run", afqmc_tfds, steps=1), LENGTH_128]
    runner = runner_for(argv)
    one = memory_check.step_bytes(runner.trainer.compile_train_step())["total"]
    two = memory_check.step_bytes(runner.trainer.with_grad_accum_steps(2).compile_train_step())
    assert two["total"] < one
    room = int(memory_check.HEADROOM * two["total"] / memory_check.TIGHT) + 1
    assert memory_check.HEADROOM * one > room, "the tiny step's figures are too close"
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (room, "a test"))
    with pytest.raises(ConfigError) as info:
        runner.train()
    message = str(info.value)
    assert re.match(r"the training step needs about \d+ MiB .* for batch 8 x 128\)", message)
    assert "--gin.RunConfig.grad_accum_steps=2 (micro-batches of 4" in message
    assert runner.checkpoints.latest_step() is None
    state, _ = runner_for([*argv, "--gin.RunConfig.grad_accum_steps=2"]).train()
    assert int(state.step) == 1


def test_a_finished_run_is_not_compiled_or_checked_again(tmp_path, monkeypatch, capsys, afqmc_tfds):
    argv = flags(tmp_path / "run", afqmc_tfds, steps=STEPS)
    runner_for(argv).train()
    capsys.readouterr()
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (1024, "a test"))
    state, _ = runner_for(argv).train()  # e.g. a rerun after a kill in the final evaluation
    assert int(state.step) == STEPS
    assert "compiling the training step" not in capsys.readouterr().out


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
    tmp_path, capsys, xla_compilations, afqmc_tfds
):
    runner = runner_for(flags(tmp_path / "run", afqmc_tfds, steps=STEPS))
    state, _ = runner.train()
    assert int(state.step) == STEPS
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


def test_hosts_agree_a_host_that_fits_stops_when_another_cannot(tmp_path, monkeypatch, afqmc_tfds):
    """Every host gathers every host's verdict (test_multihost runs the real collective
    with both fitting); here the other host's is 0, so this one stops too instead of
    waiting in the first collective for a host that has left."""
    from jax.experimental import multihost_utils

    runner = runner_for(flags(tmp_path / "run", afqmc_tfds, steps=STEPS))
    monkeypatch.setattr(memory_check.jax, "process_count", lambda: 2)
    gathered = []

    def allgather(value):
        gathered.append(int(value))
        if len(gathered) == 1:  # the machine keys: the other host's differs
            return np.array([int(value), int(value) ^ 1])
        return np.array([int(value), 0])

    monkeypatch.setattr(multihost_utils, "process_allgather", allgather)
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (64 * GIB, "a test"))
    with pytest.raises(ConfigError, match=r"^another host's training step cannot fit"):
        runner.train()
    assert gathered[1:] == [1]


def test_processes_of_one_run_on_one_host_share_its_memory(tmp_path, monkeypatch, afqmc_tfds):
    """Two processes on one machine each need the step's memory: a step that fits the host
    once stops when the host runs it twice, and the message says why."""
    from jax.experimental import multihost_utils

    runner = runner_for(flags(tmp_path / "run", afqmc_tfds, steps=STEPS))
    compiled = runner.trainer.compile_train_step()
    needed = memory_check.step_bytes(compiled)["total"]
    whole = int(1.5 * memory_check.HEADROOM * needed)  # fits one process, not two
    assert memory_check.share_of_host((whole, "a test")) == (whole, "a test")  # one process
    monkeypatch.setattr(memory_check.jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda v: np.array([v, v]))
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (whole, "a test"))
    assert memory_check.share_of_host((whole, "a test")) == (
        whole // 2,
        "a test, shared by the 2 processes of this run on this host",
    )
    # Compiled once (above); no advice sizing (its own test is above).
    monkeypatch.setattr(runner.trainer, "compile_train_step", lambda: compiled)
    monkeypatch.setattr(memory_check, "fewest_micro_batches", lambda *args: None)
    with pytest.raises(ConfigError, match=r"shared by the 2 processes of this run on this"):
        memory_check.compile_and_check(runner.trainer, runner.run)
    # Processes on other machines (other keys) leave each machine's memory whole.
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda v: np.array([v, v ^ 1]))
    assert memory_check.share_of_host((whole, "a test")) == (whole, "a test")


def test_the_cli_prints_the_message_as_one_error_line(tmp_path, monkeypatch, capsys, afqmc_tfds):
    from cmrcx import train
    from cmrcx.cli import launch

    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (1024, "a test"))
    with pytest.raises(SystemExit) as info:
        launch.main_guard(train.main, flags(tmp_path / "run", afqmc_tfds, steps=STEPS))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error: the training step needs about ")
    assert "Traceback" not in err
