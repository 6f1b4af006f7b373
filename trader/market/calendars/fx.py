"""The FX week, built here: exchange_calendars has no calendar for it."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.units import BUILD_PAD
from trader.market.calendars.wall_clock import utc_datetime, utc_ms

FX = "fx"
FX_ZONE = "America/New_York"
_FX_ROLL = time(17)  # the FX day ends at 17:00 New York
_FX_CLOSED = {(12, 25), (1, 1)}


def fx_calendar(begin: int, end: int) -> TradingCalendar:
    """The FX week over [begin, end): Sunday 17:00 to Friday 17:00 New York, closed from 17:00
    the day before Christmas Day and New Year's Day until 17:00 on the day. A session's label
    is the New York date at its 17:00 close."""
    zone = ZoneInfo(FX_ZONE)
    day = (utc_datetime(begin) - BUILD_PAD).date()
    stop = (utc_datetime(end) + BUILD_PAD).date()
    labels: list[int] = []
    intervals: list[list[int]] = []
    while day <= stop:
        if day.weekday() < 5 and (day.month, day.day) not in _FX_CLOSED:
            close = utc_ms(datetime.combine(day, _FX_ROLL, zone))
            open_ = utc_ms(datetime.combine(day - timedelta(days=1), _FX_ROLL, zone))
            if intervals and intervals[-1][1] == open_:
                intervals[-1][1] = close  # the days of a week run into one interval
            else:
                intervals.append([open_, close])
            labels.append(utc_ms(datetime.combine(day, time(), UTC)))
        day += timedelta(days=1)
    return TradingCalendar(FX, FX_ZONE, intervals, labels, begin, end)
