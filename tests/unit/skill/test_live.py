"""Live skill's pieces: one forecast's score adds up to evaluate's figures, the rolling
window, and the stability checks."""

from __future__ import annotations

from datetime import UTC, datetime
from statistics import NormalDist

import numpy as np
import pytest

from trader.domain import Forecast, Timeframe
from trader.skill import score
from trader.skill.live import (
    RollingSkill,
    clipped,
    jump_sigmas,
    median_return,
    score_one,
    spread_ratio,
)

LEVELS = tuple(round(0.05 * i, 2) for i in range(1, 20))
AS_OF = datetime(2024, 1, 1, tzinfo=UTC)


def forecast(center: float, width: float, steps: int = 3) -> Forecast:
    table = {q: [center * (1 + width * (q - 0.5))] * steps for q in LEVELS}
    return Forecast(
        "SOL/USDT", "toto", AS_OF, Timeframe("1h"), steps, {"close": table},
        {"close": [center] * steps},
    )  # fmt: skip


def width_for(sigma: float) -> float:
    """The `forecast` width whose 5-95% interval is that of a normal with this sigma."""
    return sigma * 2 * NormalDist().inv_cdf(0.95) / 0.9


def test_window_figures_are_evaluates_over_the_same_origins():
    rng = np.random.default_rng(2)
    rolling = RollingSkill(window=3)
    made = []
    for _ in range(5):
        closes = list(100 * (1 + rng.normal(0, 0.01, 3)))
        # The naive reference from the same origin: here a narrower spread around no change.
        sums, naive = score_one(forecast(100.0, 0.04), forecast(100.0, 0.02), 100.0, closes)
        rolling.add("toto", "SOL/USDT", sums)
        rolling.add("naive", "SOL/USDT", naive)
        made.append(closes)
    # The window keeps the last three: the same figures as scoring those three together.
    values = np.array([[[0.04 * (q - 0.5) for q in LEVELS]] * 3] * 3)
    reference = values / 2
    realised = np.array(made[-3:]) / 100 - 1
    expected = score(LEVELS, values, realised, reference=reference).figures()
    got = rolling.figures("toto", "SOL/USDT")
    assert got.forecasts == 3
    assert got.crps == pytest.approx(expected.crps)
    assert got.mase == pytest.approx(expected.mase)
    assert got.skill_vs_naive == pytest.approx(expected.skill)
    assert got.skill_vs_no_change == pytest.approx(expected.skill_no_change)
    assert got.skill_vs_naive != pytest.approx(got.skill_vs_no_change)  # two references
    assert got.coverage == pytest.approx(expected.coverage)
    naive = rolling.figures("naive", "SOL/USDT")
    assert naive.mase == 1.0  # its median is no change
    assert naive.skill_vs_naive == 0.0  # scored against itself
    point = score(LEVELS, reference, realised).figures().skill_no_change
    assert naive.skill_vs_no_change == pytest.approx(point)
    assert rolling.figures("kronos", "SOL/USDT").crps is None  # nothing scored yet


def test_score_one_needs_every_step():
    with pytest.raises(ValueError, match="2 closes for a 3-step forecast"):
        score_one(forecast(100.0, 0.04), forecast(100.0, 0.02), 100.0, [100.0, 101.0])
    with pytest.raises(ValueError, match="the naive reference's levels"):
        score_one(forecast(100.0, 0.04), forecast(100.0, 0.02, steps=2), 100.0, [1.0, 2.0, 3.0])


def test_stability_checks():
    window = list(100 + np.sin(np.arange(64) / 3))
    assert not clipped(forecast(100.0, 0.04), window)
    assert clipped(forecast(100.0, 2.5), window)  # a quantile at a price of 0 or less
    assert clipped(forecast(110.0, 0.0), window)  # ten standard deviations above the window
    # A spread matching the window's one-bar moves is near 1; ten times wider is near 10.
    walk = list(100 * np.exp(np.cumsum(np.random.default_rng(0).normal(0, 0.01, 200))))
    ratio = spread_ratio(forecast(walk[-1], width_for(0.01)), walk[-1], walk)
    assert ratio is not None
    assert 0.7 < ratio < 1.4
    wide = spread_ratio(forecast(walk[-1], width_for(0.1)), walk[-1], walk)
    assert wide is not None
    assert wide > 7
    assert median_return(forecast(101.0, 0.04), 100.0) == pytest.approx(0.01)
    assert jump_sigmas(0.0, 0.03, 0.01, 9) == pytest.approx(1.0)
