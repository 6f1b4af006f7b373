"""The scoring rules against values worked out by hand and closed forms."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy.stats import binom

from trader.skill import naive_reference, score
from trader.skill.rules import crps, median_of, pinball

DECILES = np.array([0.1, 0.5, 0.9])
GRID = np.round(np.arange(1, 20) * 0.05, 10)  # 0.05 .. 0.95, the default levels


def gaussian_crps(y: float, mu: float, sigma: float) -> float:
    """Gneiting and Raftery's closed form for N(mu, sigma^2)."""
    z = (y - mu) / sigma
    unit = NormalDist()
    return sigma * (z * (2 * unit.cdf(z) - 1) + 2 * unit.pdf(z) - 1 / math.sqrt(math.pi))


def normal_quantiles(levels: np.ndarray, mu: float = 0.0, sigma: float = 1.0) -> np.ndarray:
    unit = NormalDist(mu, sigma)
    return np.array([unit.inv_cdf(float(q)) for q in levels])


def test_quantile_losses_by_hand() -> None:
    values = np.array([-1.0, 0.0, 1.0])
    # y = 2 lies above every quantile: q * (y - F_q) = 0.3, 1.0, 0.9.
    assert pinball(DECILES, values, np.array(2.0)) == pytest.approx([0.3, 1.0, 0.9])
    assert float(crps(DECILES, values, np.array(2.0))) == pytest.approx(2 * 2.2 / 3)
    # y = 0.5: 0.1 * 1.5 = 0.15; 0.5 * 0.5 = 0.25; (1 - 0.9) * 0.5 = 0.05.
    assert pinball(DECILES, values, np.array(0.5)) == pytest.approx([0.15, 0.25, 0.05])
    assert float(crps(DECILES, values, np.array(0.5))) == pytest.approx(2 * 0.45 / 3)


def test_gaussian_crps_matches_the_closed_form() -> None:
    # 999 evenly spaced levels describe N(0.3, 2^2) closely: the quantile CRPS converges to the
    # closed form (within 0.5% here; the tails beyond 0.0005 and 0.9995 are left out).
    levels = np.arange(1, 1000) / 1000
    values = normal_quantiles(levels, 0.3, 2.0)
    for y in (-3.0, 0.0, 0.3, 1.7, 5.0):
        got = float(crps(levels, values, np.array(y)))
        assert got == pytest.approx(gaussian_crps(y, 0.3, 2.0), rel=5e-3)


def test_a_degenerate_forecast_scores_its_absolute_error() -> None:
    # Every quantile at one point x: the CRPS of a point forecast is |y - x| (levels
    # symmetric about 0.5, as the default ones are).
    x, ys = 1.25, np.array([-2.0, 1.25, 3.0, 1.0])
    values = np.full((4, GRID.size), x)
    assert crps(GRID, values, ys) == pytest.approx(np.abs(ys - x))


def test_a_perfect_forecast_scores_zero() -> None:
    realised = np.array([[0.01, -0.02], [0.03, 0.0]])
    values = np.repeat(realised[:, :, None], GRID.size, axis=2)
    figures = score(GRID, values, realised).figures()
    assert figures.crps == 0.0
    assert figures.mae == 0.0
    assert figures.mase == 0.0
    assert figures.wql == 0.0
    assert figures.skill == 1.0
    assert figures.hit_rate == 1.0  # the realised 0 was forecast as 0: no direction, left out


def test_the_no_change_forecast_has_mase_one_and_skill_zero() -> None:
    rng = np.random.default_rng(1)
    realised = rng.normal(0, 0.01, size=(50, 4))
    values = np.zeros((50, 4, GRID.size))
    figures = score(GRID, values, realised).figures()
    assert figures.mase == 1.0  # exactly: the same sums
    assert figures.skill == 0.0
    assert figures.hit_rate is None  # no change has no direction
    for step in range(4):
        assert score(GRID, values, realised).figures(step).mase == 1.0


def test_a_calibrated_forecaster_covers_within_its_binomial_interval() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    realised = rng.normal(0, 1, size=(n, 1))
    values = np.broadcast_to(normal_quantiles(GRID), (n, 1, GRID.size))
    figures = score(GRID, values, realised).figures()
    for name, width in (("50", 0.5), ("80", 0.8), ("90", 0.9)):
        low, high = binom.interval(0.999, n, width)
        share = figures.coverage[name]
        assert share is not None
        assert low / n <= share <= high / n, (name, share)
    for level, below in figures.calibration:
        low, high = binom.interval(0.999, n, level)
        assert below is not None
        assert low / n <= below <= high / n, (level, below)
    # ... while a forecaster half as wide covers far too little.
    narrow = score(GRID, values * 0.5, realised).figures().coverage["80"]
    assert narrow is not None
    assert narrow < binom.interval(0.999, n, 0.8)[0] / n


def test_missing_outcomes_are_left_out_and_missing_intervals_say_so() -> None:
    realised = np.array([[0.02, np.nan], [np.nan, np.nan]])
    values = np.zeros((2, 2, DECILES.size)) + np.array([-0.01, 0.0, 0.01])
    figures = score(DECILES, values, realised).figures()
    assert figures.scored == 1
    assert figures.crps == pytest.approx(float(crps(DECILES, values[0, 0], np.array(0.02))))
    assert figures.coverage["80"] == 0.0  # 0.02 lies above the 0.9 quantile
    assert figures.coverage["50"] is None  # no 0.25 / 0.75 levels
    assert score(DECILES, values, realised).figures(1).crps is None


def test_weighted_quantile_loss_on_prices() -> None:
    # Returns on a last close of 100: the loss is that of the prices (pinball x 100) over the
    # realised prices, whatever the price level.
    levels = DECILES
    values = np.array([[[-0.01, 0.0, 0.01]]])
    realised = np.array([[0.02]])
    got = score(levels, values, realised, scale=np.array([100.0])).figures().wql
    prices = 100 * (1 + values)
    expected = 2 * float(pinball(levels, prices[0, 0], np.array(102.0)).mean()) / 102.0
    assert got == pytest.approx(expected)


def test_median_is_interpolated_where_the_levels_lack_it() -> None:
    levels = np.array([0.2, 0.4, 0.6, 0.8])
    values = np.array([1.0, 2.0, 4.0, 5.0])
    assert float(median_of(levels, values)) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("levels", "shape", "message"),
    [
        ([0.5, 0.1], (1, 1, 2), "rise strictly"),
        ([0.0, 0.5], (1, 1, 2), "rise strictly"),
        ([0.1, 0.5], (1, 1, 3), r"\[origin, step, level\]"),
    ],
)
def test_bad_input_is_refused(levels: list[float], shape: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score(levels, np.zeros(shape), np.zeros(shape[:2]))
    with pytest.raises(ValueError, match="finite"):
        score([0.5], np.full((1, 1, 1), np.nan), np.zeros((1, 1)))


def test_the_headline_skill_is_against_the_probabilistic_reference() -> None:
    # Outcomes from N(0, 1), forecast by N(0, 1) itself: against the no-change point it earns
    # 1 - E CRPS / E|y| = 1 - (1 / sqrt(pi)) / sqrt(2 / pi) = 1 - 1 / sqrt(2) for its spread
    # alone (Gneiting and Raftery 2007's closed form); against a reference of the same
    # distribution, 0 exactly.
    levels = np.arange(1, 1000) / 1000
    rng = np.random.default_rng(11)
    realised = rng.normal(0, 1, size=(4000, 1))
    values = np.broadcast_to(normal_quantiles(levels), (4000, 1, levels.size))
    figures = score(levels, values, realised, reference=values).figures()
    assert figures.skill == 0.0
    assert figures.crps_naive == figures.crps
    assert figures.skill_no_change == pytest.approx(1 - 1 / math.sqrt(2), abs=0.02)
    assert figures.mase == pytest.approx(1.0)  # the median is no change
    # A sharper forecast centred on the outcome beats the reference; one as sharp but off by
    # two standard deviations loses to it.
    sharp = realised[:, :, None] + normal_quantiles(levels, 0.0, 0.1)
    assert score(levels, sharp, realised, reference=values).figures().skill > 0.8
    wrong = sharp + 2.0
    assert score(levels, wrong, realised, reference=values).figures().skill < -0.5


def test_a_reference_of_another_shape_or_not_finite_is_refused() -> None:
    values = np.zeros((2, 3, DECILES.size))
    realised = np.zeros((2, 3))
    with pytest.raises(ValueError, match="naive reference is"):
        score(DECILES, values, realised, reference=np.zeros((2, 2, DECILES.size)))
    with pytest.raises(ValueError, match="must be finite"):
        score(DECILES, values, realised, reference=np.full(values.shape, np.nan))


def test_reports_name_the_naive_window_and_a_shorter_context() -> None:
    assert "forecast.naive_window = 256" in naive_reference(256, 512, 4)
    assert "whole window" not in naive_reference(256, 512, 4)
    assert "here the whole window of 64 bars" in naive_reference(256, 64, 6)
