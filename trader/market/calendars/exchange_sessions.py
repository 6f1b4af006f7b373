"""Exchange sessions from exchange_calendars, as a TradingCalendar.

exchange_calendars is imported on first use, not with this module: importing it, with pandas,
takes about half a second, and a crypto daemon never needs it.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, time, timedelta
from typing import Any

import numpy as np

from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.units import BUILD_PAD, Int64s
from trader.market.calendars.wall_clock import utc_datetime, utc_ms

_FAR_END = datetime(2100, 1, 1, tzinfo=UTC)  # for exchanges with no last buildable date
_NAT = np.iinfo(np.int64).min


def exchange_calendars() -> Any:
    # Imported on first use; it has no type information, so its values are Any here.
    return importlib.import_module("exchange_calendars")


def exchange_span(name: str, begin_ms: int, begin: int, end: int) -> tuple[int, int]:
    """[begin, end) clipped to the dates exchange_calendars can build `name` for; ValueError
    when the span asked for, from `begin_ms`, starts outside them."""
    factory = _factory(name)
    low = factory.bound_min() if factory is not None else None
    high = factory.bound_max() if factory is not None else None
    if low is not None:
        low_ms = utc_ms(datetime.combine(low.date(), time(), UTC))
        if begin_ms < low_ms:
            raise ValueError(
                f"{utc_datetime(begin_ms):%Y-%m-%d} is before {name}'s first known session"
                f" ({low:%Y-%m-%d}): exchange_calendars cannot build {name} earlier"
            )
        begin = max(begin, low_ms)
    last = (
        datetime.combine(high.date() + timedelta(days=1), time(), UTC)
        if high is not None
        else _FAR_END
    )
    end = min(end, utc_ms(last))
    if begin_ms >= end:
        raise ValueError(
            f"{utc_datetime(begin_ms):%Y-%m-%d} is after the last date exchange_calendars can"
            f" build {name} for ({utc_datetime(end - 1):%Y-%m-%d})"
        )
    return begin, end


def exchange_calendar(name: str, begin: int, end: int) -> TradingCalendar:
    """The exchange `name`'s sessions over [begin, end) (an exchange_calendars code)."""
    factory = _factory(name)
    first = utc_datetime(begin) - BUILD_PAD
    last = utc_datetime(end) + BUILD_PAD
    if factory is not None and factory.bound_min() is not None:
        first = max(first, datetime.combine(factory.bound_min().date(), time(), UTC))
    if factory is not None and factory.bound_max() is not None:
        last = min(last, datetime.combine(factory.bound_max().date(), time(), UTC))
    built = exchange_calendars().get_calendar(
        name, start=first.date().isoformat(), end=last.date().isoformat()
    )
    schedule = built.schedule
    opens = _column_ms(schedule["open"])
    closes = _column_ms(schedule["close"])
    break_starts = _column_ms(schedule["break_start"])
    break_ends = _column_ms(schedule["break_end"])
    lunch = (break_starts != _NAT) & (break_ends != _NAT) & (break_starts < break_ends)
    # A session with a break is two intervals: [open, break start) and [break end, close).
    intervals = np.stack(
        [
            opens,
            np.where(lunch, break_starts, closes),
            np.where(lunch, break_ends, _NAT),
            np.where(lunch, closes, _NAT),
        ],
        axis=1,
    ).reshape(-1, 2)
    intervals = intervals[intervals[:, 0] != _NAT]
    labels = (
        np.asarray(schedule.index.values, dtype="datetime64[D]")
        .astype("datetime64[ms]")
        .astype(np.int64)
    )
    return TradingCalendar(
        name,
        str(built.tz.key),
        intervals,
        labels,
        begin,
        end,
        has_breaks=bool(lunch.any()),
    )


def _column_ms(column: Any) -> Int64s:
    """A schedule column (UTC datetimes, NaT where absent) as epoch ms; NaT stays int64 min."""
    # to_numpy with a datetime64 dtype: UTC values, where `.values` of tz-aware data is
    # deprecated (Pandas4Warning).
    values = column.to_numpy(dtype="datetime64[ms]")
    return np.where(np.isnat(values), _NAT, values.astype(np.int64)).astype(np.int64)


def _factory(name: str) -> Any:
    """The exchange's calendar class, for its buildable bounds without building it.

    exchange_calendars has no public name -> class map; without one the build itself reports
    an out-of-bounds span."""
    calendar_utils = importlib.import_module("exchange_calendars.calendar_utils")
    factories = getattr(calendar_utils, "_default_calendar_factories", {})
    return factories.get(name)
