"""An exchange's regular week, for the days after the last session exchange_calendars knows.

Some of the library's calendars end on a fixed date (XSHG, XBOM and XSES on 2026-12-31 in
4.13): their holidays are tables, not rules, and nobody has written the next year's yet. Past
that date a calendar goes on with the exchange's regular sessions: its trading days of the
week (`weekmask`), its regular open, close and lunch-break times in its own time zone (the
entries of `open_times`, `close_times`, `break_start_times` and `break_end_times` in force on
the day), its `open_offset` and `close_offset` (a session that opens the evening before), each
instant worked out in `tz` on the day (DST-correct). No holidays and no early closes: the
daemon says so wherever it runs on these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from trader.market.calendars.wall_clock import utc_ms

# exchange_calendars' regular times: (first date in force or None for always, time of day).
Times = tuple[tuple[date | None, time | None], ...]


@dataclass(frozen=True)
class RegularWeek:
    name: str
    timezone: str
    weekmask: str  # Monday first: "1111100" (or numpy's "Mon Tue ..." form)
    opens: Times
    closes: Times
    break_starts: Times = ()
    break_ends: Times = ()
    open_offset: int = 0  # days from the session's date to its open (-1: the evening before)
    close_offset: int = 0

    @classmethod
    def of(cls, calendar: Any) -> RegularWeek:
        """The regular week of an exchange_calendars `ExchangeCalendar` instance."""
        return cls(
            name=str(calendar.name),
            timezone=str(calendar.tz.key),
            weekmask=str(calendar.weekmask),
            opens=_times(calendar.open_times),
            closes=_times(calendar.close_times),
            break_starts=_times(calendar.break_start_times),
            break_ends=_times(calendar.break_end_times),
            open_offset=int(calendar.open_offset),
            close_offset=int(calendar.close_offset),
        )

    def sessions(
        self, first: date, last: date, not_before_ms: int | None = None
    ) -> tuple[list[list[int]], list[int], bool]:
        """The regular sessions dated `first` .. `last` (inclusive) that open at or after
        `not_before_ms`: their trading intervals [open, close) in epoch ms (two for a session
        with a break), their date labels (epoch ms of 00:00 UTC of the date), and whether any
        has a break."""
        zone = ZoneInfo(self.timezone)
        intervals: list[list[int]] = []
        labels: list[int] = []
        has_breaks = False
        day = first
        while day <= last:
            session = self._session(day, zone)
            if session and (not_before_ms is None or session[0][0] >= not_before_ms):
                intervals += session
                has_breaks = has_breaks or len(session) == 2
                labels.append(utc_ms(datetime.combine(day, time(), UTC)))
            day += timedelta(days=1)
        return intervals, labels, has_breaks

    def _session(self, day: date, zone: ZoneInfo) -> list[list[int]]:
        """The day's trading intervals: none off the exchange's week, two around a break."""
        if not np.is_busday(np.datetime64(day.isoformat()), weekmask=self.weekmask):
            return []
        open_ = _at(day, self.open_offset, _in_force(self.opens, day), zone)
        close = _at(day, self.close_offset, _in_force(self.closes, day), zone)
        start = _in_force(self.break_starts, day) if self.break_starts else None
        end = _in_force(self.break_ends, day) if self.break_ends else None
        if start is not None and end is not None:
            pause = _at(day, 0, start, zone), _at(day, 0, end, zone)
            if open_ < pause[0] < pause[1] < close:
                return [[open_, pause[0]], [pause[1], close]]
        return [[open_, close]]


def _times(entries: Sequence[tuple[Any, time | None]] | None) -> Times:
    """exchange_calendars' (Timestamp or None, time) entries with plain dates; an entry whose
    time is None (a break that ended) is kept as no time."""
    if not entries:
        return ()
    return tuple((None if since is None else since.date(), at) for since, at in entries)


def _in_force(entries: Times, day: date) -> time | None:
    """The time of the latest entry in force on `day` (entries are in date order)."""
    found: time | None = None
    for since, at in entries:
        if since is None or since <= day:
            found = at
    return found


def _at(day: date, offset: int, at: time | None, zone: ZoneInfo) -> int:
    if at is None:
        raise ValueError(f"no regular time in force on {day}")
    return utc_ms(datetime.combine(day + timedelta(days=offset), at, zone))
