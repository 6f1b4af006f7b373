"""Forecast skill: proper scoring rules over a batch of quantile forecasts (CRPS, quantile
loss, skill against the probabilistic naive reference and against the no-change point, MAE and
MASE of the median against no change, hit rate, interval coverage and calibration),
block-bootstrap intervals and Diebold-Mariano tests. One implementation serves
`trader evaluate`, the backtest's forecaster section and the daemon's live skill metrics.

    # values[origin, step, level], realised[origin, step], reference: the naive's, like values
    scores = score(levels, values, realised, reference=reference)
    scores.figures()                           # every step; figures(step=k): step k only
    bootstrap_intervals(scores, block_weights(scores.origins, block, 1000))
    diebold_mariano(scores.per_origin_crps(), other.per_origin_crps(), lag)
"""

from trader.skill.inference import (
    DieboldMariano,
    Interval,
    block_length,
    block_weights,
    bootstrap_intervals,
    diebold_mariano,
    overlap_lag,
)
from trader.skill.returns import as_returns, forecast_table
from trader.skill.rules import (
    INTERVALS,
    Figures,
    Ratio,
    Scores,
    crps,
    median_of,
    naive_reference,
    pinball,
    score,
)

__all__ = [
    "INTERVALS",
    "DieboldMariano",
    "Figures",
    "Interval",
    "Ratio",
    "Scores",
    "as_returns",
    "block_length",
    "block_weights",
    "bootstrap_intervals",
    "crps",
    "diebold_mariano",
    "forecast_table",
    "median_of",
    "naive_reference",
    "overlap_lag",
    "pinball",
    "score",
]
