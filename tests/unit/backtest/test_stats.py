"""Performance statistics against values worked out by hand on small paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trader.backtest.stats import drawdown, performance

# Returns +10%, -5%, +10%, -5%: mean 0.025, sample std sqrt(0.0225 / 3) = 0.0866025.
ZIGZAG = [100.0, 110.0, 104.5, 114.95, 109.2025]


def test_a_zigzag_path_has_the_statistics_worked_out_by_hand():
    stats = performance(ZIGZAG, periods_per_year=4)
    assert stats.periods == 4
    assert stats.years == 1.0
    assert stats.total_return == pytest.approx(1.1**2 * 0.95**2 - 1)  # 0.092025
    assert stats.annual_return == pytest.approx(0.092025)  # one year: the total
    assert stats.volatility == pytest.approx(math.sqrt(3) / 10)  # 0.0866 * sqrt(4)
    assert stats.sharpe == pytest.approx(1 / math.sqrt(3))  # 0.025 / 0.0866 * 2
    # Downside deviation sqrt((0.05^2 + 0.05^2) / 4) = 0.035355: 0.025 / 0.035355 * 2.
    assert stats.sortino == pytest.approx(math.sqrt(2))
    assert stats.max_drawdown == pytest.approx(0.05)  # 110 -> 104.5
    assert stats.max_drawdown_bars == 2  # peak at bar 1, back above it at bar 3
    assert stats.max_drawdown_recovered
    assert stats.longest_drawdown_bars == 2
    assert stats.max_drawdown_peak == 1


def test_a_known_sharpe_on_a_long_path():
    mu, sigma, n, per_year = 0.001, 0.02, 1000, 8766.0
    r = np.where(np.arange(n) % 2 == 0, mu + sigma, mu - sigma)
    equity = 100 * np.concatenate([[1.0], np.cumprod(1 + r)])
    stats = performance(equity, per_year)
    sample_std = sigma * math.sqrt(n / (n - 1))
    assert stats.sharpe == pytest.approx(mu / sample_std * math.sqrt(per_year), rel=1e-9)
    assert stats.annual_return == pytest.approx(
        (equity[-1] / equity[0]) ** (per_year / n) - 1, rel=1e-12
    )


def test_the_risk_free_rate_comes_off_every_bar():
    r = np.array([0.01, -0.005, 0.02, 0.0])
    equity = 100 * np.concatenate([[1.0], np.cumprod(1 + r)])
    rf = 0.05
    per_bar = 1.05 ** (1 / 12) - 1
    stats = performance(equity, 12, risk_free_rate=rf)
    excess = r - per_bar
    assert stats.sharpe == pytest.approx(excess.mean() / r.std(ddof=1) * math.sqrt(12))


def test_the_deepest_drawdown_runs_from_its_peak_to_recovery():
    worst = drawdown([100, 120, 90, 60, 100, 130, 117])
    assert worst.depth == pytest.approx(0.5)  # 120 -> 60
    assert (worst.peak, worst.bars, worst.recovered) == (1, 4, True)  # bar 1 to bar 5
    assert worst.longest == 4


def test_a_drawdown_never_recovered_lasts_to_the_end():
    worst = drawdown([100, 105, 101, 110, 80, 90])
    assert worst.depth == pytest.approx(1 - 80 / 110)
    assert (worst.peak, worst.bars, worst.recovered) == (3, 2, False)  # bar 3 to the last
    assert worst.longest == 2


def test_a_longer_shallow_drawdown_counts_as_the_longest():
    worst = drawdown([100, 99, 98, 99, 101, 70, 102])
    assert worst.bars == 2  # the deep one: bar 4 to bar 6
    assert worst.longest == 4  # the shallow one: bar 0 to bar 4


def test_flat_equity_has_no_ratio_rather_than_a_made_up_one():
    stats = performance([100.0] * 10, 8766)
    assert stats.sharpe is None
    assert stats.sortino is None
    assert stats.total_return == 0
    assert stats.max_drawdown == 0
    assert stats.max_drawdown_bars == 0


def test_no_losing_bar_means_no_sortino():
    assert performance([100, 101, 102, 103], 252).sortino is None


def test_equity_must_stay_positive():
    with pytest.raises(ValueError, match="positive"):
        performance([100, 50, 0], 252)
    with pytest.raises(ValueError, match="at least one tick"):
        performance([100], 252)
