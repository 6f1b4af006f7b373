"""The deflated Sharpe ratio (Bailey and López de Prado, "The Deflated Sharpe Ratio: Correcting
for Selection Bias, Backtest Overfitting and Non-Normality", Journal of Portfolio Management
40(5), 2014): how likely it is that the best of N trials has a true Sharpe ratio above zero,
once its luck at being the best of N is taken off.

With the best trial's per-bar Sharpe ratio SR (not annualised), over T returns of skewness g3
and kurtosis g4 (Pearson's: 3 for a normal law):

    SR0 = sqrt(V) * ((1 - c) * Z^-1(1 - 1/N) + c * Z^-1(1 - 1/(N e)))      c = 0.5772...
    DSR = Z((SR - SR0) * sqrt(T - 1) / sqrt(1 - g3 * SR + (g4 - 1) / 4 * SR^2))

where V is the variance of the N trials' Sharpe ratios and Z the standard normal law. SR0 is
the Sharpe ratio the best of N trials reaches by chance when none has skill. With one trial,
SR0 = 0 and the DSR is the probabilistic Sharpe ratio against zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

EULER_GAMMA = 0.5772156649015329
_Z = NormalDist()


@dataclass(frozen=True)
class ReturnMoments:
    """What the DSR needs of one trial's per-bar returns."""

    periods: int  # T
    sharpe: float | None  # per bar, not annualised; None without variation
    skewness: float
    kurtosis: float  # Pearson's: 3 for a normal law


def moments(returns: Sequence[float] | np.ndarray, risk_free_per_bar: float = 0.0) -> ReturnMoments:
    r = np.asarray(returns, dtype=np.float64) - risk_free_per_bar
    n = len(r)
    std = float(np.std(r, ddof=1)) if n > 1 else 0.0
    if std <= 0 or not math.isfinite(std):
        return ReturnMoments(n, None, 0.0, 3.0)
    centred = r - float(np.mean(r))
    spread = float(np.std(r))  # population moments, as the paper's
    skew = float(np.mean(centred**3)) / spread**3
    kurt = float(np.mean(centred**4)) / spread**4
    return ReturnMoments(n, float(np.mean(r)) / std, skew, kurt)


@dataclass(frozen=True)
class Deflated:
    trials: int  # N
    best_sharpe: float  # per bar
    expected_max_sharpe: float  # SR0: what the best of N reaches by luck alone, per bar
    probability: float  # the DSR


def expected_max_sharpe(trials: int, variance: float) -> float:
    """SR0: the expected largest of `trials` Sharpe ratios of no skill, spread `variance`."""
    if trials < 2 or variance <= 0:
        return 0.0
    first = _Z.inv_cdf(1.0 - 1.0 / trials)
    second = _Z.inv_cdf(1.0 - 1.0 / (trials * math.e))
    return math.sqrt(variance) * ((1.0 - EULER_GAMMA) * first + EULER_GAMMA * second)


def deflated_sharpe(best: ReturnMoments, sharpes: Sequence[float | None], trials: int) -> Deflated:
    """The DSR of `best` among `trials` trials whose Sharpe ratios (per bar) are `sharpes`
    (None for a trial without variation: it counts as a trial, not in the variance)."""
    if best.sharpe is None or best.periods < 2:
        raise ValueError("the best trial's returns do not vary: it has no Sharpe ratio")
    known = [s for s in sharpes if s is not None]
    variance = float(np.var(known, ddof=1)) if len(known) > 1 else 0.0
    sr0 = expected_max_sharpe(trials, variance)
    sr = best.sharpe
    denominator = 1.0 - best.skewness * sr + (best.kurtosis - 1.0) / 4.0 * sr**2
    z = (sr - sr0) * math.sqrt(best.periods - 1) / math.sqrt(max(denominator, 1e-12))
    return Deflated(trials, sr, sr0, _Z.cdf(z))
