"""A model's forecast for one symbol: quantiles and mean per field and horizon step."""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from trader.domain.errors import DomainError
from trader.domain.symbols import check_symbol
from trader.domain.time import Timeframe, ensure_utc

# Sample quantiles are monotone up to interpolation rounding; more than this is a bug upstream.
_CROSSING_TOLERANCE = 1e-9


def _series(values: Sequence[float], steps: int, where: str) -> tuple[float, ...]:
    series = tuple(map(float, values))
    if len(series) != steps:
        raise DomainError(f"{where}: expected {steps} steps, got {len(series)}")
    if not all(map(math.isfinite, series)):
        bad = next(v for v in series if not math.isfinite(v))
        raise DomainError(f"{where}: non-finite value {bad}")
    return series


def _quantile_table(
    field: str, by_level: Mapping[float, Sequence[float]], steps: int
) -> Mapping[float, tuple[float, ...]]:
    """Validated series per level, sorted by level, never crossing."""
    table = {float(q): tuple(map(float, v)) for q, v in by_level.items()}
    if not table:
        raise DomainError(f"forecast field {field!r} has no quantiles")
    if any(len(series) != steps for series in table.values()) or not all(
        map(math.isfinite, itertools.chain.from_iterable(table.values()))
    ):
        for q, series in table.items():
            _series(series, steps, f"{field} q{q}")  # names the first bad series
    levels = sorted(table)
    for level in levels:
        if not 0.0 < level < 1.0:
            raise DomainError(f"quantile level {level} is outside (0, 1)")
    for lower, upper in itertools.pairwise(levels):
        below, above = table[lower], table[upper]
        if all(map(operator.le, below, above)):
            continue  # the common case, checked in C
        for step, (lo, hi) in enumerate(zip(below, above, strict=True)):
            if lo > hi + _CROSSING_TOLERANCE * max(1.0, abs(hi)):
                raise DomainError(
                    f"{field} step {step}: quantile {lower} ({lo}) is above quantile {upper} ({hi})"
                )
    return MappingProxyType({level: table[level] for level in levels})


@dataclass(frozen=True)
class Forecast:
    """`quantiles[field][level][step]` and `mean[field][step]`; step 0 is the next bar.

    `as_of` is the close time of the last bar the model saw: nothing after it was used.
    """

    symbol: str
    model: str
    as_of: datetime
    timeframe: Timeframe
    steps: int
    quantiles: Mapping[str, Mapping[float, Sequence[float]]]
    mean: Mapping[str, Sequence[float]]

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        if not self.model:
            raise DomainError("forecast model name is empty")
        object.__setattr__(self, "as_of", ensure_utc(self.as_of, "forecast as_of"))
        if not isinstance(self.steps, int) or isinstance(self.steps, bool) or self.steps < 1:
            raise DomainError(f"forecast steps must be a positive int, got {self.steps!r}")
        if not self.quantiles:
            raise DomainError("forecast has no fields")
        if set(self.mean) != set(self.quantiles):
            raise DomainError(
                f"forecast mean fields {sorted(self.mean)} differ from quantile fields "
                f"{sorted(self.quantiles)}"
            )
        tables = {f: _quantile_table(f, q, self.steps) for f, q in self.quantiles.items()}
        if len({tuple(table) for table in tables.values()}) != 1:
            raise DomainError("every forecast field has the same quantile levels")
        object.__setattr__(self, "quantiles", MappingProxyType(tables))
        mean = {f: _series(v, self.steps, f"{f} mean") for f, v in self.mean.items()}
        object.__setattr__(self, "mean", MappingProxyType(mean))

    @classmethod
    def unchecked(
        cls,
        symbol: str,
        model: str,
        as_of: datetime,
        timeframe: Timeframe,
        steps: int,
        quantiles: Mapping[str, Mapping[float, Sequence[float]]],
        mean: Mapping[str, Sequence[float]],
    ) -> Forecast:
        """A forecast that was checked when it was made and is only read back now (a
        backtest's cache holds each one exactly): `as_of` in UTC, levels sorted, and the
        tables read-only mappings, used as they are."""
        forecast = object.__new__(cls)
        for name, value in (
            ("symbol", symbol), ("model", model), ("as_of", as_of), ("timeframe", timeframe),
            ("steps", steps), ("quantiles", quantiles), ("mean", mean),
        ):  # fmt: skip
            object.__setattr__(forecast, name, value)
        return forecast

    @property
    def levels(self) -> tuple[float, ...]:
        return tuple(next(iter(self.quantiles.values())))

    def quantile(self, field: str, level: float, step: int = -1) -> float:
        try:
            return self.quantiles[field][level][step]
        except KeyError:
            raise DomainError(
                f"forecast has no {field!r} quantile {level} "
                f"(fields {sorted(self.quantiles)}, levels {self.levels})"
            ) from None

    def step_end(self, step: int) -> datetime:
        """When the bar forecast at `step` closes."""
        return self.as_of + (step + 1) * self.timeframe.duration
