"""The `lot` mixture's rates (`cmrcx.tasks.lot.mixture`): proportional by default, named
per task from gin (RunConfig.mixture_rates, checked with a one-line error), and the
fixed training epoch they give."""

from __future__ import annotations

import pytest

from cmrcx.cli import launch
from cmrcx.common import errors
from cmrcx.tasks.lot import mixture

SIZES = {"lot_clozet": 644, "lot_senpos": 20_000, "lot_plotcom": 13_099, "lot_outgen": 1_456}


def test_default_rates_are_proportional_and_give_every_example_once():
    rates = mixture.mixture_rates(None, SIZES)
    assert rates == {row: float(n) for row, n in SIZES.items()}
    assert mixture.epoch_counts(SIZES, rates) == SIZES  # Table 3's 35,199 examples, once each


def test_equal_rates_repeat_the_small_tasks():
    rates = mixture.mixture_rates(dict.fromkeys(SIZES, 1.0), SIZES)
    counts = mixture.epoch_counts(SIZES, rates)
    assert counts == dict.fromkeys(SIZES, 20_000)  # SenPos once, ClozeT about 31 times


def test_uneven_rates_are_exact_shares_and_hold_every_example():
    rates = {"lot_clozet": 3.0, "lot_senpos": 1.0, "lot_plotcom": 1.0, "lot_outgen": 0.5}
    counts = mixture.epoch_counts(SIZES, rates)
    total = sum(counts.values())
    assert all(counts[row] >= SIZES[row] for row in SIZES)
    for row, rate in rates.items():
        assert abs(counts[row] - total * rate / 5.5) < 1
    # The least such epoch: one example fewer and some task would miss examples.
    assert total == max(-(-SIZES[row] * 5.5 // rate) for row, rate in rates.items())


def test_a_zero_rate_or_an_empty_task_leaves_it_out_of_training():
    rates = {**dict.fromkeys(SIZES, 1.0), "lot_senpos": 0.0}
    assert mixture.epoch_counts(SIZES, rates)["lot_senpos"] == 0
    sizes = {**SIZES, "lot_outgen": 0}  # e.g. every record dropped by the leak guard
    counts = mixture.epoch_counts(sizes, mixture.mixture_rates(None, sizes))
    assert counts == sizes


@pytest.mark.parametrize(
    "rates, message",
    [
        ({"lot_clozet": 1.0}, "missing lot_outgen, lot_plotcom, lot_senpos"),
        ({**dict.fromkeys(SIZES, 1.0), "clozet": 1.0}, "unknown clozet"),
        ({**dict.fromkeys(SIZES, 1.0), "lot_outgen": -1.0}, "rate of lot_outgen: -1.0"),
        ({**dict.fromkeys(SIZES, 1.0), "lot_outgen": "a"}, "'a' is not a number"),
        (dict.fromkeys(SIZES, 0.0), "all 0"),
    ],
)
def test_bad_rates_are_named(rates, message):
    with pytest.raises(ValueError, match=message):
        mixture.mixture_rates(rates, SIZES)


RATES = "{'lot_clozet': 4.0, 'lot_senpos': 1.0, 'lot_plotcom': 1.0, 'lot_outgen': 2.0}"


def test_rates_come_from_gin(tmp_path):
    launch.parse_gin(
        ["lot_mixture_tiny.gin"],
        [f"MODEL_DIR = '{tmp_path}'", f"RunConfig.mixture_rates = {RATES}"],
    )
    run = launch.run_config_from_gin()
    assert run.task == "lot"
    assert run.mixture_rates == {
        "lot_clozet": 4.0, "lot_senpos": 1.0, "lot_plotcom": 1.0, "lot_outgen": 2.0
    }  # fmt: skip


@pytest.mark.parametrize(
    "rates, message",
    [
        ("{'lot_clozet': 1.0}", "name each of lot_clozet, lot_senpos, lot_plotcom, lot_outgen"),
        (RATES.replace("2.0", "-2.0"), r"mixture_rates\['lot_outgen'\] = -2.0: use a finite"),
        ("{'lot_clozet': 0, 'lot_senpos': 0, 'lot_plotcom': 0, 'lot_outgen': 0}", "all 0"),
    ],
)
def test_bad_gin_rates_are_one_line(tmp_path, rates, message):
    launch.parse_gin(
        ["lot_mixture_tiny.gin"],
        [f"MODEL_DIR = '{tmp_path}'", f"RunConfig.mixture_rates = {rates}"],
    )
    with pytest.raises(errors.ConfigError, match=message):
        launch.run_config_from_gin()


def test_rates_on_a_single_task_are_refused(tmp_path):
    launch.parse_gin(
        ["lot_outgen_tiny.gin"], [f"MODEL_DIR = '{tmp_path}'", f"RunConfig.mixture_rates = {RATES}"]
    )
    with pytest.raises(errors.ConfigError, match="mixture_rates is for the task 'lot'"):
        launch.run_config_from_gin()
