"""Where each calendar's known sessions end, and the words that say so (the start-up warning,
/readyz, the log when the clock passes the end).

Past the last session exchange_calendars knows, a calendar runs on its exchange's regular week
without holidays (`regular_week`): right most days, wrong on every holiday. An operator must
hear it before it happens and while it lasts, with the fix: a newer exchange_calendars.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from trader.market.calendars.calendar import TradingCalendar

WARN_BEFORE = timedelta(days=30)
REGULAR = "the exchange's regular weekly sessions (no holidays)"
FIX = "upgrade exchange_calendars (it publishes each exchange's sessions a year or so ahead)"


@dataclass(frozen=True)
class KnownEnd:
    """A calendar's known sessions: up to `last_session_ms` (inf: a continuous market never
    ends), and whether the sessions after it are the regular week (else the end of the span
    the calendar is built to, rebuilt further ahead as time goes on)."""

    calendar: str
    timezone: str
    last_session_ms: float
    regular_after: bool

    def fallback(self, now_ms: int) -> bool:
        """Whether `now` is past the known sessions, on the regular week."""
        return self.regular_after and now_ms >= self.last_session_ms

    def last_session(self) -> str:
        """The end in the exchange's own time: "2026-12-31 15:00 Asia/Shanghai"."""
        if math.isinf(self.last_session_ms):
            return "never (always open)"
        at = datetime.fromtimestamp(self.last_session_ms / 1000, UTC)
        return f"{at.astimezone(ZoneInfo(self.timezone)):%Y-%m-%d %H:%M} {self.timezone}"


def known_end(calendar: TradingCalendar) -> KnownEnd:
    if calendar.known_until_ms is not None:
        return KnownEnd(calendar.name, calendar.timezone, calendar.known_until_ms, True)
    end = math.inf if calendar.span_ms is None else calendar.span_ms[1]
    return KnownEnd(calendar.name, calendar.timezone, end, False)


def known_ends(calendars: Iterable[TradingCalendar]) -> list[KnownEnd]:
    """One per calendar name, in name order."""
    by_name = {c.name: known_end(c) for c in calendars}
    return [by_name[name] for name in sorted(by_name)]


@dataclass(frozen=True)
class Notice:
    """A calendar whose known sessions have ended, or end soon (or before a replay's end)."""

    end: KnownEnd
    ended: bool

    @property
    def runs_on(self) -> str:
        if self.ended:
            return f"runs on {REGULAR} since then"
        return f"will run on {REGULAR} after it"

    def fields(self) -> dict[str, str]:
        """For a structured log line."""
        return {
            "calendar": self.end.calendar,
            "last_known_session": self.end.last_session(),
            "runs_on": self.runs_on,
            "fix": FIX,
        }

    def text(self) -> str:
        return (
            f"{self.end.calendar}: exchange_calendars knows its sessions to"
            f" {self.end.last_session()}; {self.runs_on}: {FIX}"
        )


def notices(ends: Iterable[KnownEnd], now_ms: int, until_ms: int | None = None) -> list[Notice]:
    """The calendars whose known sessions have ended by `now`, end within WARN_BEFORE of it,
    or end before `until_ms` (a replay's last tick)."""
    horizon = now_ms + WARN_BEFORE // timedelta(milliseconds=1)
    if until_ms is not None:
        horizon = max(horizon, until_ms)
    return [
        Notice(end, end.fallback(now_ms))
        for end in ends
        if end.regular_after and end.last_session_ms <= horizon
    ]


def readiness(ends: Iterable[KnownEnd], now_ms: int) -> str:
    """/readyz's words: each calendar past or near its known sessions, else how far each
    calendar's sessions are known."""
    ends = list(ends)
    said = notices(ends, now_ms)
    if said:
        return "; ".join(notice.text() for notice in said)
    known = ", ".join(f"{end.calendar} to {end.last_session()}" for end in ends)
    return f"sessions known: {known}" if known else "no calendar"
