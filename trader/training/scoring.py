"""Scores of forecasts of the close's return over a horizon, against what happened.

The boundary the project's shared scoring module (`trader.skill`, issue 18) replaces: the
evaluation calls `score` only, with quantiles of the return at fixed levels per window and
step, and the realised returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
ESTIMATOR = (
    "returns of the close relative to the last close of the context; quantile_loss: the "
    "pinball loss averaged over levels 0.1..0.9 and the horizon's steps; crps: twice that "
    "(the quantile estimator of CRPS, tails beyond 0.1/0.9 left out); mae: of the median; "
    "coverage_80: share of realised returns inside the 0.1..0.9 interval"
)


@dataclass(frozen=True)
class Scores:
    windows: int
    quantile_loss: float
    crps: float
    mae: float
    coverage_80: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def score(
    quantiles: NDArray[np.float64], levels: Sequence[float], actual: NDArray[np.float64]
) -> Scores:
    """quantiles [N, H, Q] at `levels` (ascending, 0.1, 0.5 and 0.9 among them), actual [N, H]."""
    taus = np.asarray(levels, dtype=np.float64)
    error = actual[..., None] - quantiles  # [N, H, Q]
    pinball = np.maximum(taus * error, (taus - 1) * error)
    quantile_loss = float(pinball.mean())
    median = quantiles[..., list(levels).index(0.5)]
    low, high = quantiles[..., list(levels).index(0.1)], quantiles[..., list(levels).index(0.9)]
    inside = (actual >= low) & (actual <= high)
    return Scores(
        windows=int(actual.shape[0]),
        quantile_loss=quantile_loss,
        crps=2 * quantile_loss,
        mae=float(np.abs(actual - median).mean()),
        coverage_80=float(inside.mean()),
    )
