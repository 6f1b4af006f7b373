"""Prices adjusted for splits and dividends, from a file's adjusted close.

A data vendor's adjusted close (Yahoo's and Quandl WIKI's `Adj Close`) is the close scaled by
every later split and dividend, so that the series has no jump the holder did not live through.
Each row's ratio adjusted close / close scales its open, high and low the same way, and its
volume inversely (a 2:1 split halves the price and doubles the shares traded; the traded value,
a quote volume, is unchanged). Raw prices book a split as a one-bar loss of half the position's
value; the adjusted ones are what a holder earned, which is why they are the default.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from trader.market.files.adjustment import Adjustment
from trader.market.files.arrow_numpy import to_arrow, to_numpy
from trader.market.files.columns import ValueColumns
from trader.market.files.report import Row
from trader.market.files.splits import SplitMove, split_moves

Floats = npt.NDArray[np.float64]


def ratios(columns: ValueColumns) -> Floats | None:
    """adjusted close / close per row (NaN where either is missing or not positive); None for
    a file without an adjusted close."""
    if columns.adjusted_close is None:
        return None
    close, adjusted = floats(columns.values[3]), floats(columns.adjusted_close)
    usable = (close > 0) & (adjusted > 0)  # NaN compares False
    return np.where(usable, adjusted / np.where(usable, close, 1.0), np.nan)


def adjust(columns: ValueColumns, prices: str) -> tuple[list[pa.Array], Adjustment | None]:
    """The values to trade: adjusted by the file's adjusted close (`prices` "adjusted"), or as
    written ("raw", or a file without one); and what was done."""
    ratio = ratios(columns)
    if ratio is None or columns.adjusted_name is None:
        return columns.values, None
    usable = np.isfinite(ratio)
    lowest = float(ratio[usable].min()) if usable.any() else float("nan")
    highest = float(ratio[usable].max()) if usable.any() else float("nan")
    done = Adjustment(columns.adjusted_name, prices, lowest, highest, int((~usable).sum()))
    if prices == "raw":
        return columns.values, done
    numbers = [floats(v) for v in columns.values]
    # Close too is close x ratio, not the adjusted close itself: the same product as the high
    # and the low, so a bar whose high was its close still is (no rounding apart).
    scaled = [numbers[i] * ratio for i in range(4)]
    volume = numbers[4] / ratio if columns.volume_known else numbers[4]
    values = [to_arrow(v, pa.float64()) for v in (*scaled, volume)]
    return values + columns.values[5:], done


def kept_splits(
    ms: npt.NDArray[np.int64], columns: ValueColumns, kept: Sequence[Row]
) -> tuple[SplitMove, ...]:
    """The split-like moves of the closes traded (`kept`: the rows read, in time order), judged
    by the file's adjusted close where it has one (`ms`: every row's time, in file order)."""
    kept_ms = np.fromiter((row[0] for row in kept), np.int64, len(kept))
    closes = np.array([row[4] for row in kept], dtype=np.float64)  # None is NaN
    adjusted = columns.adjusted_close
    judge = None if adjusted is None else by_time(np.asarray(ms), floats(adjusted), kept_ms)
    return tuple(split_moves(kept_ms, closes, judge))


def floats(values: pa.Array) -> Floats:
    """A float64 column as numpy, a missing value as NaN."""
    filled = values.fill_null(float("nan")) if values.null_count else values
    return np.asarray(to_numpy(filled, np.float64))


def by_time(ms: npt.NDArray[np.int64], values: Floats, kept_ms: npt.NDArray[np.int64]) -> Floats:
    """`values` (one per row of the file, in file order) for the rows kept (`kept_ms`, sorted
    and distinct): a time written twice keeps its first row's, as the reading does."""
    order = np.argsort(ms, kind="stable")
    times, first = np.unique(ms[order], return_index=True)
    taken = values[order][first]
    return taken[np.searchsorted(times, kept_ms)]
