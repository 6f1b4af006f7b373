"""A stock market's sessions as the Alpaca emulator serves them: whether it is open, the next
open and close (`/v2/clock`), and the days with their hours (`/v2/calendar`)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo

from trader.domain import from_epoch_ms, to_epoch_ms
from trader.market.calendars.registry import build_calendar

NEW_YORK = ZoneInfo("America/New_York")


@dataclass(frozen=True)
class Sessions:
    opens: tuple[int, ...]  # epoch ms, ascending
    closes: tuple[int, ...]

    @classmethod
    def of(cls, calendar: str, begin: datetime, end: datetime) -> Sessions:
        built = build_calendar(calendar, to_epoch_ms(begin), to_epoch_ms(end))
        rows = built.intervals_ms
        return cls(tuple(int(r[0]) for r in rows), tuple(int(r[1]) for r in rows))

    def is_open(self, when: datetime) -> bool:
        t = to_epoch_ms(when)
        i = bisect.bisect_right(self.opens, t) - 1
        return i >= 0 and t < self.closes[i]

    def next_open(self, when: datetime) -> datetime | None:
        i = bisect.bisect_right(self.opens, to_epoch_ms(when))
        return from_epoch_ms(self.opens[i]) if i < len(self.opens) else None

    def next_close(self, when: datetime) -> datetime | None:
        i = bisect.bisect_right(self.closes, to_epoch_ms(when))
        return from_epoch_ms(self.closes[i]) if i < len(self.closes) else None

    def last_close(self, when: datetime) -> datetime | None:
        i = bisect.bisect_right(self.closes, to_epoch_ms(when)) - 1
        return from_epoch_ms(self.closes[i]) if i >= 0 else None

    def days(self, start: date, end: date) -> list[tuple[date, datetime, datetime]]:
        """Each session's New York date, open and close, for dates in [start, end]."""
        out = []
        for o, c in zip(self.opens, self.closes, strict=True):
            opened = from_epoch_ms(o).astimezone(NEW_YORK)
            if start <= opened.date() <= end:
                out.append((opened.date(), opened, from_epoch_ms(c).astimezone(NEW_YORK)))
        return out

    def session_date(self, when: datetime) -> date | None:
        """The New York date of the session `when` falls in or after the last one opened."""
        i = bisect.bisect_right(self.opens, to_epoch_ms(when)) - 1
        return from_epoch_ms(self.opens[i]).astimezone(NEW_YORK).date() if i >= 0 else None
