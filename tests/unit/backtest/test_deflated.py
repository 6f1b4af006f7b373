"""The deflated Sharpe ratio against the worked example of Bailey and López de Prado (2014)
and the properties that make it a penalty for trying many things."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trader.backtest.deflated import (
    ReturnMoments,
    deflated_sharpe,
    expected_max_sharpe,
    moments,
)


def test_the_papers_example():
    # Five years of daily returns (T = 1,250), skew -3, kurtosis 10; the best of 100 trials
    # has an annualised Sharpe of 2.5, the trials' annualised Sharpes a variance of 1/2.
    best = ReturnMoments(1250, 2.5 / math.sqrt(250), -3.0, 10.0)
    spread = math.sqrt(0.5 / 250)
    sharpes = [-spread / math.sqrt(2), spread / math.sqrt(2)]  # sample variance spread**2
    result = deflated_sharpe(best, sharpes, trials=100)
    assert result.expected_max_sharpe == pytest.approx(0.1132, abs=0.001)
    assert result.probability == pytest.approx(0.90, abs=0.01)


def test_more_trials_deflate_more_and_one_trial_is_the_probabilistic_sharpe_ratio():
    best = ReturnMoments(1000, 0.05, 0.0, 3.0)
    sharpes = list(np.linspace(-0.05, 0.05, 10))
    probabilities = [deflated_sharpe(best, sharpes, n).probability for n in (1, 10, 100, 1000)]
    assert probabilities == sorted(probabilities, reverse=True)
    alone = deflated_sharpe(best, [0.05], 1)
    assert alone.expected_max_sharpe == 0.0
    # PSR(0) of normal returns: Z(SR sqrt(T - 1) / sqrt(1 + SR^2 / 2)).
    z = 0.05 * math.sqrt(999) / math.sqrt(1 + 0.05**2 / 2)
    assert alone.probability == pytest.approx(0.5 * (1 + math.erf(z / math.sqrt(2))))
    assert expected_max_sharpe(100, 0.0) == 0.0


def test_moments_of_returns_and_a_flat_run_has_no_sharpe_ratio():
    rng = np.random.default_rng(3)
    r = rng.normal(0.001, 0.01, 20_000)
    m = moments(r)
    assert m.periods == 20_000
    assert m.sharpe == pytest.approx(0.1, abs=0.02)
    assert m.skewness == pytest.approx(0.0, abs=0.1)
    assert m.kurtosis == pytest.approx(3.0, abs=0.15)
    flat = moments(np.zeros(50))
    assert flat.sharpe is None
    with pytest.raises(ValueError, match="no Sharpe ratio"):
        deflated_sharpe(flat, [0.1], 5)
