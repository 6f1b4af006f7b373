"""A bar file's time column as UTC epoch ms, read by what it holds: timestamps, dates, epoch
numbers (their unit told by magnitude) or text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.arrow_numpy import to_numpy
from trader.market.files.offsets import check_offsets
from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import EPOCH_UTC, shown
from trader.market.files.text_times import string_times, text_times
from trader.market.files.zones import NOT_APPLIED, TO_MS, Times, clock_times, dates_zone

_DAY_MS = 86_400_000
# Epoch numbers below this (about 1973 in seconds) are row numbers or dates, not times.
_SMALLEST_EPOCH = 10**8
# Each unit up to the magnitude where the next would mean a year before 5000.
_EPOCH_UNITS = (("s", 1e11), ("ms", 1e14), ("us", 1e17), ("ns", float("inf")))


def read_times(values: pa.Array, name: str, options: ReadOptions, path: Path) -> Times:
    """`values` (the column `name`) as UTC epoch ms, with how they were read."""
    if values.null_count:
        row = int(pc.index(pc.is_null(values), True).as_py()) + 1
        raise ReplayDataError(f"{path}: data row {row} has no time in column {shown(name)}")
    kind = values.type
    if options.date_format is not None:
        text = pc.cast(values, pa.string())
        read = text_times(text, (options.date_format,), "format", options, path)
        return check_offsets(text, read, name, options, path)
    if pa.types.is_timestamp(kind):
        return clock_times(values, options, "datetime", "iso", path)
    if pa.types.is_date(kind):
        days = to_numpy(pc.cast(pc.cast(values, pa.date32()), pa.int32()), np.int32)
        return Times(days.astype(np.int64) * _DAY_MS, "date", dates_zone(options), "iso")
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return _epoch_times(values, name, options, path)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return check_offsets(values, string_times(values, name, options, path), name, options, path)
    raise ReplayDataError(f"{path}: column {shown(name)} holds {kind} values, not times")


def _epoch_times(values: pa.Array, name: str, options: ReadOptions, path: Path) -> Times:
    """Seconds, milliseconds, microseconds or nanoseconds since 1970, told by magnitude."""
    integers = pa.types.is_integer(values.type)
    if integers:
        numbers = to_numpy(pc.cast(values, pa.int64()), np.int64)
    else:
        numbers = to_numpy(pc.cast(values, pa.float64()), np.float64)
    if not integers and np.isnan(numbers).any():
        row = int(np.flatnonzero(np.isnan(numbers))[0]) + 1
        raise ReplayDataError(f"{path}: data row {row} has no time in column {shown(name)}")
    magnitude = float(np.median(np.abs(numbers)))
    if magnitude < _SMALLEST_EPOCH:
        raise ReplayDataError(
            f"{path}: column {shown(name)} holds numbers such as {numbers[0]}, too small for "
            "epoch times (a row number? a date like 20240131?); say which column holds the "
            "times with --time-column NAME, or their format with --date-format (e.g. %Y%m%d)"
        )
    unit = next(u for u, bound in _EPOCH_UNITS if magnitude < bound)
    multiply, divide = TO_MS[unit]
    if integers:
        ms = numbers.astype(np.int64) * multiply // divide
    else:
        ms = np.rint(numbers * multiply / divide)
    zone = EPOCH_UTC + (NOT_APPLIED if options.timezone else "")
    return Times(ms.astype(np.int64), f"epoch_{unit}", zone, "epoch")
