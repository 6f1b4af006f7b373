"""Trading calendars by name: the names known, and building (and keeping) a calendar by name.

Exchange sessions come from exchange_calendars (`trader.market.calendars.exchange_sessions`, which
imports it only when needed); the FX week is `trader.market.calendars.fx`.
"""

from __future__ import annotations

import difflib
from datetime import UTC, datetime

from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.exchange_sessions import (
    exchange_calendar,
    exchange_calendars,
    exchange_span,
)
from trader.market.calendars.fx import FX, fx_calendar
from trader.market.calendars.units import Anchor
from trader.market.calendars.wall_clock import utc_datetime, utc_ms

CONTINUOUS = "continuous"
_ALIASES = {"24/7": CONTINUOUS, "24/5": FX, "forex": FX}


def calendar_names() -> list[str]:
    """Every name build_calendar knows, besides aliases (continuous, fx, then the exchanges)."""
    names = exchange_calendars().get_calendar_names(include_aliases=False)
    return [CONTINUOUS, FX, *sorted(n for n in names if n not in _ALIASES)]


def canonical_name(name: str) -> str:
    """`name` as the calendar is known ("nyse" -> "XNYS", "24/7" -> "continuous")."""
    key = name.strip()
    if key.lower() in (CONTINUOUS, FX):
        return key.lower()
    if key.lower() in _ALIASES:
        return _ALIASES[key.lower()]
    xc = exchange_calendars()
    known = {n.upper(): n for n in xc.get_calendar_names(include_aliases=True) if n not in _ALIASES}
    if key.upper() in known:
        return str(xc.resolve_alias(known[key.upper()]))
    choices = {**known, "CONTINUOUS": CONTINUOUS, "FX": FX}
    close = difflib.get_close_matches(key.upper(), list(choices), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(choices[c] for c in close)}?" if close else ""
    raise ValueError(
        f"unknown trading calendar {name!r}{hint} (continuous, fx or an exchange_calendars"
        " code such as XNYS; trader.market.calendars.registry.calendar_names() lists them)"
    )


class CalendarBuilder:
    """Builds calendars and keeps them for reuse: a caller that builds many holds one."""

    def __init__(self) -> None:
        self._kept: dict[str, list[TradingCalendar]] = {}
        self.exchange_builds = 0  # exchange_calendars constructions (~0.1-0.3 s each)

    def build(
        self, name: str, begin_ms: int, end_ms: int, anchor: Anchor = "clock"
    ) -> TradingCalendar:
        """`name`'s calendar over whole UTC years around [begin, end), as far as its exchange
        can be built; continuous has no span."""
        canonical = canonical_name(name)
        if canonical == CONTINUOUS:
            return TradingCalendar.always_open(CONTINUOUS)
        begin, end = self._span(canonical, begin_ms, end_ms)
        for kept in self._kept.get(canonical, ()):
            if kept.covers(begin, end):
                return kept.with_anchor(anchor)
        if canonical == FX:
            calendar = fx_calendar(begin, end)
        else:
            calendar = exchange_calendar(canonical, begin, end)
            self.exchange_builds += 1
        self._kept.setdefault(canonical, []).append(calendar)
        return calendar.with_anchor(anchor)

    @staticmethod
    def _span(name: str, begin_ms: int, end_ms: int) -> tuple[int, int]:
        """[begin, end) widened to whole UTC years, clipped to what the exchange allows."""
        end_ms = max(end_ms, begin_ms + 1)
        begin = utc_ms(datetime(utc_datetime(begin_ms).year, 1, 1, tzinfo=UTC))
        end = utc_ms(datetime(utc_datetime(end_ms - 1).year + 1, 1, 1, tzinfo=UTC))
        if name == FX:
            return begin, end
        return exchange_span(name, begin_ms, begin, end)


def build_calendar(
    name: str, begin_ms: int, end_ms: int, anchor: Anchor = "clock"
) -> TradingCalendar:
    """`name`'s calendar covering [begin, end) (widened to whole UTC years).

    Case-insensitive; "24/7" is continuous, "24/5" and "forex" are fx, exchange_calendars'
    aliases ("NYSE") work too. A caller building repeatedly should hold a CalendarBuilder."""
    return CalendarBuilder().build(name, begin_ms, end_ms, anchor)
