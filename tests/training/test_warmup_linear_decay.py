"""`warmup_linear_decay` is transformers' get_linear_schedule_with_warmup update for update,
with warm-up and without: the LOT authors' lightning_base.py and Seq2SeqTrainer (warm-up
0) take the whole rate at the first update."""

import pytest

from cmrcx.training.trainer import warmup_linear_decay

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def transformers_rates(learning_rate: float, steps: int, warmup: int) -> list[float]:
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=learning_rate)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, warmup, steps)
    rates = []
    for _ in range(steps + 1):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return rates


@pytest.mark.parametrize(
    "steps, fraction", [(10, 0.0), (7, 0.0), (10, 0.2), (5, 0.1), (13, 0.3), (1, 0.0)]
)
def test_rates_are_transformers_linear_schedule(steps, fraction):
    schedule = warmup_linear_decay(3e-5, steps, fraction)
    ours = [float(schedule(count)) for count in range(steps + 1)]
    expected = transformers_rates(3e-5, steps, int(steps * fraction))
    assert ours == pytest.approx(expected, rel=1e-6, abs=1e-12)
    if fraction == 0.0:
        assert ours[0] == pytest.approx(3e-5)  # no warm-up: not 0 at the first update
