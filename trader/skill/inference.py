"""How sure a figure is: a moving-block bootstrap over forecast origins, and the
Diebold-Mariano test of two forecasters' losses.

Forecasts from neighbouring origins share most of their horizon, so their errors are
correlated: resampling origins one by one would make the intervals too narrow. The moving
block bootstrap (Kuensch, 1989) resamples runs of `block` consecutive origins instead, a block
at least as long as the horizon's overlap. The Diebold-Mariano test (1995) of equal expected
loss uses the long-run variance of the loss difference with a Bartlett (Newey-West) window of
the same overlap, and the Harvey, Leybourne and Newbold (1997) small-sample correction with a
Student t reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trader.skill.rules import Scores


def overlap_lag(horizon: int, spacing: int) -> int:
    """How many later origins share part of a forecast's horizon (origins `spacing` bars
    apart): the lag to which losses are correlated."""
    return max(0, math.ceil(horizon / max(spacing, 1)) - 1)


def block_length(origins: int, lag: int) -> int:
    """Blocks span the overlap, and at least the usual n^(1/3) for serial dependence."""
    root = math.floor(math.pow(origins, 1 / 3) + 0.5)
    return max(1, min(origins, max(lag + 1, root)))


def block_weights(origins: int, block: int, replicates: int, seed: int = 0) -> np.ndarray:
    """[replicate, origin]: how often each origin is drawn in each resample (moving blocks of
    `block` origins, started uniformly, joined and cut to `origins`)."""
    rng = np.random.default_rng(seed)
    block = max(1, min(block, origins))
    count = math.ceil(origins / block)
    starts = rng.integers(0, origins - block + 1, size=(replicates, count))
    drawn = (starts[:, :, None] + np.arange(block)).reshape(replicates, -1)[:, :origins]
    weights = np.zeros((replicates, origins))
    np.add.at(weights, (np.arange(replicates)[:, None], drawn), 1.0)
    return weights


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None


def bootstrap_intervals(
    scores: Scores,
    weights: np.ndarray,
    *,
    confidence: float = 0.9,
    step: int | None = None,
    names: Sequence[str] | None = None,
) -> Mapping[str, Interval]:
    """Percentile intervals of every figure (or those `names`) over the resamples `weights`."""
    tail = (1 - confidence) / 2 * 100
    out = {}
    for name, values in scores.values(weights, step, names).items():
        finite = values[np.isfinite(values)]
        if finite.size < 2:
            out[name] = Interval(None, None)
            continue
        low, high = np.percentile(finite, [tail, 100 - tail])
        out[name] = Interval(float(low), float(high))
    return out


@dataclass(frozen=True)
class DieboldMariano:
    """Test of equal expected loss; `mean_difference` < 0: the first forecaster's loss is lower."""

    statistic: float | None
    p_value: float | None
    mean_difference: float | None
    pairs: int


def diebold_mariano(first: np.ndarray, second: np.ndarray, lag: int) -> DieboldMariano:
    """Two loss series over the same origins (NaN: left out from both); `lag`: the overlap
    (horizon - 1 for origins a bar apart). None figures: too few pairs, or losses that never
    differ (no variance to test against)."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"loss series of different lengths: {a.shape} and {b.shape}")
    keep = np.isfinite(a) & np.isfinite(b)
    d = a[keep] - b[keep]
    n = int(d.size)
    if n < 3:
        return DieboldMariano(None, None, float(d.mean()) if n else None, n)
    mean = float(d.mean())
    centred = d - mean
    lag = min(lag, n - 1)
    variance = float(centred @ centred) / n
    for k in range(1, lag + 1):
        variance += 2 * (1 - k / (lag + 1)) * float(centred[k:] @ centred[:-k]) / n
    if not variance > 1e-300:
        return DieboldMariano(None, None, mean, n)
    h = lag + 1
    correction = math.sqrt(max((n + 1 - 2 * h + h * (h - 1) / n) / n, 0.0))
    statistic = mean / math.sqrt(variance / n) * correction
    # The t distribution's CDF, without scipy.stats' import; scipy loads only for this test.
    from scipy.special import stdtr  # noqa: PLC0415

    p_value = float(2 * stdtr(n - 1, -abs(statistic)))
    return DieboldMariano(statistic, p_value, mean, n)
