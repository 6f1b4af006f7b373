"""How long a paper record traded, on its market's calendar: calendar days with ticks on a
24/7 market, trading sessions on one with sessions (a session's date in its exchange's zone),
and how many ticks the calendar expected over the record: one per bar close from the first
tick to the last. The calendar is the one the daemon's bars follow (inferred from the bars
its ledger kept, as a replay infers it), or the settings' calendar when no bars say."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from trader.domain import Timeframe, to_epoch_ms
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.fit import infer_calendar
from trader.market.calendars.registry import CalendarBuilder

JUST_BEFORE = timedelta(microseconds=1)  # a tick at a session's close belongs to that session


@dataclass(frozen=True)
class Span:
    days: int  # calendar days with ticks, or trading sessions
    sessions: bool
    expected_ticks: int  # bar closes from the first tick to the last
    calendar: str


def calendar_of(
    starts_ms: Sequence[int], timeframe: Timeframe, named: str, ticks: Sequence[datetime]
) -> TradingCalendar:
    """The calendar the bars follow (`named` when there are too few bars to tell), built
    around the ticks."""
    builder = CalendarBuilder()
    if len(starts_ms) >= 2:
        found = infer_calendar(list(starts_ms), timeframe, naive=False, builder=builder).calendar
        if found.continuous:
            return found
        named = found.name
    margin = timedelta(days=30)
    first, last = to_epoch_ms(ticks[0] - margin), to_epoch_ms(ticks[-1] + margin)
    return builder.build(named, first, last)


def span_of(ticks: Sequence[datetime], calendar: TradingCalendar, timeframe: Timeframe) -> Span:
    """`ticks`: the times the daemon ran a tick, sorted (at least one)."""
    zone = ZoneInfo(calendar.timezone)
    days = len({(t - JUST_BEFORE).astimezone(zone).date() for t in ticks})
    first = calendar.last_bar_end(timeframe, to_epoch_ms(ticks[0]))
    last = calendar.last_bar_end(timeframe, to_epoch_ms(ticks[-1]))
    step = int(timeframe.duration.total_seconds() * 1000)
    expected = 0
    if first is not None and last is not None:
        expected = calendar.count_bar_starts(timeframe, first - step, last - step + 1)
    return Span(days, not calendar.continuous, expected, calendar.name)
