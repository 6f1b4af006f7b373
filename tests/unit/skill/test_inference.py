"""Block bootstrap and Diebold-Mariano: what they must do on series whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trader.skill import (
    block_length,
    block_weights,
    bootstrap_intervals,
    diebold_mariano,
    overlap_lag,
    score,
)

GRID = np.round(np.arange(1, 20) * 0.05, 10)


def test_block_weights_draw_whole_runs_of_origins() -> None:
    weights = block_weights(100, 10, 50, seed=3)
    assert weights.shape == (50, 100)
    assert (weights.sum(axis=1) == 100).all()  # each resample as long as the data
    again = block_weights(100, 10, 50, seed=3)
    assert np.array_equal(weights, again)
    one = block_weights(10, 10, 5)
    assert (one == 1).all()  # one block of everything: the data itself


def test_overlap_and_block_lengths() -> None:
    assert overlap_lag(24, 1) == 23
    assert overlap_lag(24, 24) == 0
    assert overlap_lag(24, 10) == 2
    assert block_length(1000, 23) == 24
    assert block_length(1000, 0) == 10  # n^(1/3)
    assert block_length(5, 23) == 5


def test_bootstrap_interval_holds_the_figure_and_narrows_with_data() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for n in (200, 3200):
        realised = rng.normal(0, 1, size=(n, 1))
        values = np.broadcast_to(np.linspace(-1.6, 1.6, GRID.size), (n, 1, GRID.size))
        scores = score(GRID, values, realised)
        interval = bootstrap_intervals(scores, block_weights(n, 5, 400, seed=1))["crps"]
        figure = scores.figures().crps
        assert interval.low is not None
        assert interval.high is not None
        assert figure is not None
        assert interval.low <= figure <= interval.high
        widths.append(interval.high - interval.low)
    assert widths[1] < widths[0] / 2  # 16 x the data: about a quarter of the width


def test_diebold_mariano_by_hand() -> None:
    d = np.array([1.0, -1.0, 2.0, 0.0, 3.0])
    result = diebold_mariano(d, np.zeros(5), lag=0)
    mean, variance = 1.0, float(np.mean((d - 1.0) ** 2))  # 2.0
    h, n = 1, 5
    correction = math.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    assert result.mean_difference == mean
    assert result.statistic == pytest.approx(mean / math.sqrt(variance / n) * correction)
    assert result.pairs == 5
    assert result.p_value is not None
    assert 0 < result.p_value < 1


def test_diebold_mariano_tells_a_better_forecaster_and_not_an_equal_one() -> None:
    rng = np.random.default_rng(5)
    noise = rng.normal(0, 1, size=2000)
    better = np.abs(noise) * 0.8
    worse = np.abs(noise + rng.normal(0, 1, size=2000))
    clear = diebold_mariano(better, worse, lag=3)
    assert clear.statistic is not None
    assert clear.statistic < 0
    assert clear.p_value is not None
    assert clear.p_value < 1e-6
    same = diebold_mariano(better, better, lag=3)
    assert same.statistic is None  # no difference to test
    assert same.mean_difference == 0.0
    twins = diebold_mariano(np.abs(rng.normal(size=2000)), np.abs(rng.normal(size=2000)), lag=3)
    assert twins.p_value is not None
    assert twins.p_value > 0.001


def test_diebold_mariano_leaves_out_missing_losses() -> None:
    a = np.array([1.0, np.nan, 2.0, 3.0, 1.0])
    b = np.array([0.5, 1.0, np.nan, 1.0, 0.0])
    assert diebold_mariano(a, b, lag=0).pairs == 3
    with pytest.raises(ValueError, match="different lengths"):
        diebold_mariano(a, b[:3], lag=0)
