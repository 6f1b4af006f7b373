"""How a forecast is stored (the ledger's forecasts table, a backtest's forecast cache): exact
float64 arrays, little-endian, quantiles field by field, level by level, step by step, then the
means field by field. Text would cost far more per tick.

A forecast read back without its checks (it was checked when it was made, and is stored
exactly) reads its numbers from the stored arrays when asked, and is written again as the very
row it came from: a backtest books every cached forecast once per strategy and tick.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from trader.domain import Forecast, Timeframe
from trader.ledger.codec import parse_time, time_text
from trader.ledger.database import LedgerError


class _StoredLevels(Mapping[float, Sequence[float]]):
    """One field's quantile table: level -> the `steps` values, read from the stored array."""

    __slots__ = ("_index", "_offset", "_steps", "_values")

    def __init__(self, values: array[float], offset: int, steps: int, index: Mapping[float, int]):
        self._values, self._offset, self._steps, self._index = values, offset, steps, index

    def __getitem__(self, level: float) -> tuple[float, ...]:
        start = self._offset + self._index[level] * self._steps
        return tuple(self._values[start : start + self._steps])

    def __iter__(self) -> Iterator[float]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


@lru_cache(maxsize=64)  # a run's forecasts share one layout
def _layout(
    field_text: str, level_text: str
) -> tuple[tuple[str, ...], tuple[float, ...], Mapping[float, int]]:
    """The fields, the levels and each level's place, as a stored row names them."""
    levels = tuple(float(q) for q in level_text.split(","))
    index = MappingProxyType({level: j for j, level in enumerate(levels)})
    return tuple(field_text.split(",")), levels, index


class StoredQuantiles(Mapping[str, Mapping[float, Sequence[float]]]):
    """A stored forecast's quantiles, field -> level -> steps; `row` is what was stored."""

    __slots__ = ("_fields", "_values", "row")

    def __init__(self, row: tuple[Any, ...], values: array[float]):
        self.row, self._values = row, values
        self._fields: dict[str, _StoredLevels] | None = None  # made when first read

    def _tables(self) -> dict[str, _StoredLevels]:
        if self._fields is None:
            steps = self.row[3]
            fields, levels, index = _layout(self.row[4], self.row[5])
            per_field = len(levels) * steps
            self._fields = {
                f: _StoredLevels(self._values, i * per_field, steps, index)
                for i, f in enumerate(fields)
            }
        return self._fields

    def __getitem__(self, field: str) -> Mapping[float, Sequence[float]]:
        return self._tables()[field]

    @property
    def layout(self) -> tuple[int, str, str]:
        """Its steps, fields and levels as stored: equal layouts read alike."""
        return self.row[3], self.row[4], self.row[5]

    def values_of(self, field: str) -> array[float]:
        """`field`'s whole table as stored: level after level (in `self[field]`'s order),
        each its steps (a scorer's way to read thousands of forecasts at once)."""
        steps, field_text, level_text = self.layout
        fields, levels, _ = _layout(field_text, level_text)
        if field not in fields:
            raise KeyError(field)
        size = len(levels) * steps
        start = fields.index(field) * size
        return self._values[start : start + size]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables())

    def __len__(self) -> int:
        return len(self._tables())


class _StoredMeans(Mapping[str, Sequence[float]]):
    __slots__ = ("_fields", "_steps", "_values")

    def __init__(self, values: array[float], fields: Sequence[str], steps: int) -> None:
        self._values, self._steps = values, steps
        self._fields = {f: i for i, f in enumerate(fields)}

    def __getitem__(self, field: str) -> tuple[float, ...]:
        start = self._fields[field] * self._steps
        return tuple(self._values[start : start + self._steps])

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


def forecast_row(tick: str, forecast: Forecast) -> tuple[object, ...]:
    """The row of the ledger's forecasts table (the cache's, without the tick)."""
    if isinstance(forecast.quantiles, StoredQuantiles):
        return (tick, *forecast.quantiles.row)  # read back from a row: that row again
    fields = list(forecast.quantiles)
    quantiles = array(
        "d", (v for f in fields for series in forecast.quantiles[f].values() for v in series)
    )
    mean = array("d", (v for f in fields for v in forecast.mean[f]))
    if sys.byteorder != "little":
        quantiles.byteswap()
        mean.byteswap()
    return (
        tick, forecast.symbol, forecast.model, time_text(forecast.as_of), forecast.steps,
        ",".join(fields),
        ",".join(map(repr, forecast.levels)), quantiles.tobytes(), mean.tobytes(),
    )  # fmt: skip


def read_forecast(row: Sequence[Any], timeframe: Timeframe, *, check: bool = True) -> Forecast:
    """The forecast `forecast_row` wrote (`row` without its tick). `check=False` trusts what
    was checked when it was written (only the sizes are checked again) and reads the numbers
    from the stored arrays when they are asked for."""
    symbol, model, as_of, steps, field_text, level_text, quantile_blob, mean_blob = row
    fields, levels, _ = _layout(field_text, level_text)
    quantiles, mean = array("d"), array("d")
    quantiles.frombytes(quantile_blob)
    mean.frombytes(mean_blob)
    if sys.byteorder != "little":
        quantiles.byteswap()
        mean.byteswap()
    per_field = len(levels) * steps
    if len(quantiles) != per_field * len(fields) or len(mean) != steps * len(fields):
        raise LedgerError(f"a stored forecast of {symbol} at {as_of} has the wrong size")
    if not check:
        return Forecast.unchecked(
            symbol, model, parse_time(as_of), timeframe, steps,
            StoredQuantiles(tuple(row), quantiles), _StoredMeans(mean, fields, steps),
        )  # fmt: skip
    table = {
        f: {q: tuple(quantiles[i * per_field + j * steps : i * per_field + (j + 1) * steps])
            for j, q in enumerate(levels)}
        for i, f in enumerate(fields)
    }  # fmt: skip
    means = {f: tuple(mean[i * steps : (i + 1) * steps]) for i, f in enumerate(fields)}
    return Forecast(symbol, model, parse_time(as_of), timeframe, steps, table, means)
