"""Proper scoring of a batch of quantile forecasts against what happened.

A batch is `values[origin, step, level]` at quantile `levels` (ascending, in (0, 1)), scored
against `realised[origin, step]` (NaN: not known, left out of every figure). The scoring rules
come from `scoringrules`:

- CRPS: the quantile (pinball) approximation of Berrisch and Ziel (2023),
  `scoringrules.crps_quantile`: twice the mean pinball loss over the forecast's levels. It is
  the CRPS of the distribution the quantiles describe as the levels fill (0, 1) evenly; with
  a few levels it leaves out the tails beyond the outermost ones. It is not the sample-based
  (ensemble) estimator: the forecasts this scores carry quantiles, not their samples.
- pinball (quantile) loss per level: `scoringrules.quantile_score`.

Every figure is a ratio of two sums over origins and steps (`Ratio`), so the same numbers give
the point figure, the figure per horizon step and, resampling origins, a bootstrap interval.

Two references, each scored by the same rules:
- the naive forecast (`reference`): a probabilistic forecast, the random walk with the
  empirical quantiles of past moves (the baseline forecaster's construction, made by the
  callers above this floor). The headline skill is against it: a point reference would hand
  any forecast with a spread a skill of about 0.2 for nothing.
- the no-change point forecast (`naive`, 0 by default: no change, in return space), scored as
  a forecast whose every quantile is that point: `skill_no_change`, and MASE (whose
  definition it is).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scoringrules as sr

INTERVALS = (0.5, 0.8, 0.9)  # central intervals whose coverage is reported
MEDIAN = 0.5
_LEVEL_TOLERANCE = 1e-9
_BACKEND = "numpy"  # the same arithmetic wherever numba happens to be installed


@dataclass(frozen=True)
class Ratio:
    """A figure: sum(numerator) / sum(denominator) over the origins and steps it covers."""

    numerator: np.ndarray  # [origin, step]
    denominator: np.ndarray  # [origin, step]
    one_minus: bool = False  # reported as 1 - the ratio (skill)


@dataclass(frozen=True)
class Figures:
    """What a set of forecasts scored, as plain numbers (None: nothing to compute it from)."""

    scored: int  # (origin, step) pairs with a realised value
    crps: float | None
    crps_naive: float | None  # of the probabilistic naive forecast (the reference)
    skill: float | None  # 1 - CRPS / CRPS of the probabilistic naive forecast: the headline
    crps_no_change: float | None  # of the no-change point forecast
    skill_no_change: float | None  # 1 - CRPS / CRPS of the no-change point forecast
    wql: float | None  # weighted quantile loss: sum of 2 x pinball / sum of |realised level|
    mae: float | None  # of the median
    mae_no_change: float | None  # of the no-change point forecast
    mase: float | None  # MAE / MAE of no change, over the same origins and steps
    hit_rate: float | None  # the median's direction, where it has one
    coverage: Mapping[str, float | None]  # "50", "80", "90": share inside the central interval
    calibration: tuple[tuple[float, float | None], ...]  # (level, share at or below it)


def naive_reference(window: int, context: int | None = None, horizon: int = 0) -> str:
    """What every report calls the naive reference the headline skill is measured against;
    `context`: the bars a forecast's window holds, when known (the reference sees no more)."""
    short = context is not None and context < window + horizon
    return (
        f"the random walk with the empirical quantiles of the past moves over the last {window} "
        f"bars (plus the horizon) before each origin (forecast.naive_window = {window}: the "
        "baseline forecaster's construction)"
        + (f", here the whole window of {context} bars, which is shorter" if short else "")
    )


def interval_name(width: float) -> str:
    return f"{round(width * 100):d}"


@dataclass(frozen=True)
class Scores:
    """The scored batch: every figure's sums per origin and step."""

    levels: tuple[float, ...]
    ratios: Mapping[str, Ratio]
    origins: int = field(init=False)
    steps: int = field(init=False)

    def __post_init__(self) -> None:
        shape = self.ratios["crps"].numerator.shape
        object.__setattr__(self, "origins", shape[0])
        object.__setattr__(self, "steps", shape[1])

    def sums(
        self, step: int | None = None, names: Sequence[str] | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per origin: each figure's numerator and denominator, over every step or one."""
        pick = slice(None) if step is None else slice(step, step + 1)
        return {
            name: (r.numerator[:, pick].sum(axis=1), r.denominator[:, pick].sum(axis=1))
            for name, r in self.ratios.items()
            if names is None or name in names
        }

    def values(
        self,
        weights: np.ndarray | None = None,
        step: int | None = None,
        names: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """Each figure (or those `names`) under origin `weights` ([replicate, origin] counts;
        None: each origin once), as an array over the replicates (NaN where the denominator
        is 0)."""
        w = np.ones((1, self.origins)) if weights is None else weights
        out = {}
        for name, (num, den) in self.sums(step, names).items():
            top, bottom = w @ num, w @ den
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)
            out[name] = 1.0 - ratio if self.ratios[name].one_minus else ratio
        return out

    def figures(self, step: int | None = None) -> Figures:
        v = {name: _plain(values[0]) for name, values in self.values(step=step).items()}
        scored = self.ratios["crps"].denominator
        count = int(scored.sum() if step is None else scored[:, step].sum())
        return Figures(
            count, v["crps"], v["crps_naive"], v["skill"], v["crps_no_change"],
            v["skill_no_change"], v["wql"], v["mae"], v["mae_no_change"], v["mase"],
            v["hit_rate"],
            {interval_name(c): v[f"coverage_{interval_name(c)}"] for c in INTERVALS},
            tuple((q, v[f"below_{q!r}"]) for q in self.levels),
        )  # fmt: skip

    def per_origin_crps(self) -> np.ndarray:
        """Mean CRPS over the steps of each origin (NaN where none was realised): the loss
        series a Diebold-Mariano test compares."""
        r = self.ratios["crps"]
        total, count = r.numerator.sum(axis=1), r.denominator.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)


def _plain(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def _check(
    levels: np.ndarray, values: np.ndarray, realised: np.ndarray, reference: np.ndarray | None
) -> None:
    if levels.ndim != 1 or levels.size == 0:
        raise ValueError("quantile levels: a non-empty list")
    if np.any((levels <= 0) | (levels >= 1)) or np.any(np.diff(levels) <= 0):
        raise ValueError(f"quantile levels must rise strictly inside (0, 1), got {levels}")
    if values.ndim != 3 or values.shape[2] != levels.size:
        raise ValueError(
            f"forecast values are [origin, step, level] with {levels.size} levels, "
            f"got shape {values.shape}"
        )
    if realised.shape != values.shape[:2]:
        raise ValueError(
            f"realised values are [origin, step] {values.shape[:2]}, got {realised.shape}"
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("forecast values must be finite")
    if reference is not None and reference.shape != values.shape:
        raise ValueError(
            f"the naive reference is [origin, step, level] {values.shape}, got {reference.shape}"
        )
    if reference is not None and not np.all(np.isfinite(reference)):
        raise ValueError("the naive reference's values must be finite")


def median_of(levels: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The 0.5 quantile: the forecast's own, else interpolated between its neighbours (the
    nearest level where 0.5 lies outside the levels)."""
    at = np.flatnonzero(np.isclose(levels, MEDIAN, atol=_LEVEL_TOLERANCE))
    if at.size:
        return values[..., int(at[0])]
    above = int(np.searchsorted(levels, MEDIAN))
    if above in (0, levels.size):
        return values[..., min(above, levels.size - 1)]
    low, high = float(levels[above - 1]), float(levels[above])
    t = (MEDIAN - low) / (high - low)
    return np.asarray(values[..., above - 1] * (1 - t) + values[..., above] * t)


def _level_index(levels: np.ndarray, level: float) -> int | None:
    at = np.flatnonzero(np.isclose(levels, level, atol=_LEVEL_TOLERANCE))
    return int(at[0]) if at.size else None


def crps(levels: np.ndarray, values: np.ndarray, realised: np.ndarray) -> np.ndarray:
    """Quantile-approximated CRPS per forecast ([..., level] values, [...] realised)."""
    return np.asarray(
        sr.crps_quantile(realised, values, levels, backend=_BACKEND), dtype=np.float64
    )


def pinball(levels: np.ndarray, values: np.ndarray, realised: np.ndarray) -> np.ndarray:
    """The quantile (pinball) loss per level ([..., level])."""
    return np.asarray(
        sr.quantile_score(realised[..., None], values, levels, backend=_BACKEND),
        dtype=np.float64,
    )


def score(
    levels: np.ndarray | tuple[float, ...] | list[float],
    values: np.ndarray,
    realised: np.ndarray,
    *,
    reference: np.ndarray | None = None,
    naive: np.ndarray | float = 0.0,
    scale: np.ndarray | None = None,
) -> Scores:
    """Score `values[origin, step, level]` against `realised[origin, step]`.

    `reference`: the probabilistic naive forecast's quantiles, [origin, step, level] like
    `values`: `crps_naive` and the headline `skill` are against it. None (a caller with no
    history to make one from): they are against the point forecast `naive`, as
    `skill_no_change` is.
    `naive`: the no-change point forecast per origin and step (0, for returns): MASE, the hit
    rate's direction and `skill_no_change`.
    `scale`: per origin, the level a return is of (the last close): the weighted quantile loss
    is then that of the prices, as forecasters publish it; None: of the values as given.
    """
    q = np.asarray(levels, dtype=np.float64)
    x = np.asarray(values, dtype=np.float64)
    y = np.asarray(realised, dtype=np.float64)
    r = None if reference is None else np.asarray(reference, dtype=np.float64)
    _check(q, x, y, r)
    known = np.isfinite(y)
    y0 = np.where(known, y, 0.0)
    point = np.broadcast_to(np.asarray(naive, dtype=np.float64), y.shape)
    ones = known.astype(np.float64)
    zero = np.zeros_like(ones)

    crps_model = np.where(known, crps(q, x, y0), 0.0)
    crps_point = np.where(known, crps(q, np.broadcast_to(point[..., None], x.shape), y0), 0.0)
    crps_naive = crps_point if r is None else np.where(known, crps(q, r, y0), 0.0)
    losses = pinball(q, x, y0)  # [origin, step, level]
    s = np.ones(y.shape) if scale is None else np.asarray(scale, dtype=np.float64)[:, None]
    level_of = (1.0 + y0) * s if scale is not None else y0
    wql_top = np.where(known, 2.0 * losses.mean(axis=2) * s, 0.0)
    median = median_of(q, x)
    error = np.where(known, np.abs(median - y0), 0.0)
    naive_error = np.where(known, np.abs(point - y0), 0.0)
    direction = np.sign(median - point)
    directed = known & (direction != 0)
    hits = directed & (direction == np.sign(y0 - point))

    ratios: dict[str, Ratio] = {
        "crps": Ratio(crps_model, ones),
        "crps_naive": Ratio(crps_naive, ones),
        "skill": Ratio(crps_model, crps_naive, one_minus=True),
        "crps_no_change": Ratio(crps_point, ones),
        "skill_no_change": Ratio(crps_model, crps_point, one_minus=True),
        "wql": Ratio(wql_top, np.where(known, np.abs(level_of), 0.0)),
        "mae": Ratio(error, ones),
        "mae_no_change": Ratio(naive_error, ones),
        "mase": Ratio(error, naive_error),
        "hit_rate": Ratio(hits.astype(np.float64), directed.astype(np.float64)),
    }
    for width in INTERVALS:
        low = _level_index(q, round((1 - width) / 2, 10))
        high = _level_index(q, round((1 + width) / 2, 10))
        name = f"coverage_{interval_name(width)}"
        if low is None or high is None:
            ratios[name] = Ratio(zero, zero)  # the forecast has no such interval
            continue
        inside = known & (x[..., low] <= y0) & (y0 <= x[..., high])
        ratios[name] = Ratio(inside.astype(np.float64), ones)
    for j, level in enumerate(q.tolist()):
        below = known & (y0 <= x[..., j])
        ratios[f"below_{level!r}"] = Ratio(below.astype(np.float64), ones)
    return Scores(tuple(q.tolist()), ratios)
