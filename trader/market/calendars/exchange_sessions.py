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
from trader.market.calendars.regular_week import RegularWeek
from trader.market.calendars.units import BUILD_PAD, Int64s
from trader.market.calendars.wall_clock import utc_datetime, utc_ms

_FAR_END = datetime(2100, 1, 1, tzinfo=UTC)  # no calendar is built further
_KNOWN_TAIL = timedelta(days=28)  # of the library's sessions, at least this much is built
_NAT = np.iinfo(np.int64).min


def exchange_calendars() -> Any:
    # Imported on first use; it has no type information, so its values are Any here.
    return importlib.import_module("exchange_calendars")


def exchange_span(name: str, begin_ms: int, begin: int, end: int) -> tuple[int, int]:
    """[begin, end) clipped to the dates `name` can be built for: from exchange_calendars'
    first session on; past its last known one the regular week goes on (`regular_week`).
    ValueError when the span asked for, from `begin_ms`, starts outside them."""
    factory = _factory(name)
    low = factory.bound_min() if factory is not None else None
    if low is not None:
        low_ms = utc_ms(datetime.combine(low.date(), time(), UTC))
        if begin_ms < low_ms:
            raise ValueError(
                f"{utc_datetime(begin_ms):%Y-%m-%d} is before {name}'s first known session"
                f" ({low:%Y-%m-%d}): exchange_calendars cannot build {name} earlier"
            )
        begin = max(begin, low_ms)
    end = min(end, utc_ms(_FAR_END))
    if begin_ms >= end:
        raise ValueError(
            f"{utc_datetime(begin_ms):%Y-%m-%d} is after the last date {name} can be built"
            f" for ({utc_datetime(end - 1):%Y-%m-%d})"
        )
    return begin, end


def exchange_calendar(name: str, begin: int, end: int) -> TradingCalendar:
    """The exchange `name`'s sessions over [begin, end) (an exchange_calendars code): the
    library's, and past the last date it knows (its `bound_max`), the exchange's regular week
    without holidays (`known_until_ms` says where)."""
    factory = _factory(name)
    first = (utc_datetime(begin) - BUILD_PAD).date()
    last = (utc_datetime(end) + BUILD_PAD).date()
    low = factory.bound_min().date() if factory is not None and factory.bound_min() else None
    bound = factory.bound_max().date() if factory is not None and factory.bound_max() else None
    if low is not None:
        first = max(first, low)
    known_last = last if bound is None else min(last, bound)
    # A span wholly past the bound still builds the library's last weeks: the regular week
    # is read off that calendar, and its last session joins the two.
    known_first = min(first, known_last - _KNOWN_TAIL)
    if low is not None:
        known_first = max(known_first, low)
    built = exchange_calendars().get_calendar(
        name, start=known_first.isoformat(), end=known_last.isoformat()
    )
    intervals, labels, has_breaks = _known_sessions(built.schedule)
    known_until: int | None = None
    if bound is not None and last > bound:
        known_until = int(intervals[-1, 1])
        week = RegularWeek.of(built)
        # Joined without an overlap: a session opening the evening before (open_offset -1)
        # may not open before the last known one closes.
        more, more_labels, more_breaks = week.sessions(
            bound + timedelta(days=1), last, not_before_ms=known_until
        )
        intervals = np.concatenate([intervals, np.asarray(more, dtype=np.int64).reshape(-1, 2)])
        labels = np.concatenate([labels, np.asarray(more_labels, dtype=np.int64)])
        has_breaks = has_breaks or more_breaks
    return TradingCalendar(
        name,
        str(built.tz.key),
        intervals,
        labels,
        begin,
        end,
        has_breaks=has_breaks,
        known_until_ms=known_until,
    )


def _known_sessions(schedule: Any) -> tuple[Int64s, Int64s, bool]:
    """A schedule's trading intervals (a session with a break is two: [open, break start) and
    [break end, close)), its session labels, and whether any session has a break."""
    opens = _column_ms(schedule["open"])
    closes = _column_ms(schedule["close"])
    break_starts = _column_ms(schedule["break_start"])
    break_ends = _column_ms(schedule["break_end"])
    lunch = (break_starts != _NAT) & (break_ends != _NAT) & (break_starts < break_ends)
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
    return intervals, labels, bool(lunch.any())


def _column_ms(column: Any) -> Int64s:
    """A schedule column (UTC datetimes, NaT where absent) as epoch ms; NaT stays int64 min."""
    # to_numpy with a datetime64 dtype: UTC values, where `.values` of tz-aware data is
    # deprecated (Pandas4Warning).
    values = column.to_numpy(dtype="datetime64[ms]")
    return np.where(np.isnat(values), _NAT, values.astype(np.int64)).astype(np.int64)


def _factory(name: str) -> Any:
    """The exchange's calendar class (a registered calendar type too), for its buildable
    bounds without building it.

    exchange_calendars has no public name -> class map; without one the build itself reports
    an out-of-bounds span."""
    calendar_utils = importlib.import_module("exchange_calendars.calendar_utils")
    dispatcher = getattr(calendar_utils, "global_calendar_dispatcher", None)
    factories = getattr(dispatcher, "_calendar_factories", None)
    if factories is None:
        factories = getattr(calendar_utils, "_default_calendar_factories", {})
    return factories.get(name)
