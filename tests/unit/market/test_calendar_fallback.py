"""Calendars past the last session exchange_calendars knows: the exchange's regular week
without holidays, joined to the known sessions, checked against the library's own sessions.

The bounded calendar is chosen at run time from the library's factories (the first one whose
sessions have a lunch break: XSHG in 4.13), so these tests follow an upgrade that moves its
end. None of the library's bounded calendars has summer time, so a DST change past the end is
checked on XLON registered with an end of the test's choosing (the library's own mechanism:
`register_calendar_type`), against the library's real XLON sessions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import exchange_calendars as xc
import numpy as np
import pandas as pd
import pytest
from exchange_calendars.calendar_utils import _default_calendar_factories
from exchange_calendars.exchange_calendar_xlon import XLONExchangeCalendar
from structlog.testing import capture_logs

from trader.domain import Timeframe, from_epoch_ms
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.fit import fit_calendar
from trader.market.calendars.known_end import REGULAR, known_end, notices, readiness
from trader.market.calendars.per_symbol import REBUILD_BEFORE, SymbolCalendars
from trader.market.calendars.registry import CalendarBuilder, build_calendar
from trader.market.calendars.regular_week import RegularWeek

M5, H1 = Timeframe("5m"), Timeframe("1h")
DAY_MS = 86_400_000


def ms(day: date, at: time = time(), zone: str = "UTC") -> int:
    return int(datetime.combine(day, at, ZoneInfo(zone)).timestamp()) * 1000


def bounded_with_lunch() -> tuple[str, date]:
    """Of exchange_calendars' calendars that end, the one that ends first whose sessions
    have a lunch break (XSHG in 4.13)."""
    bounded = sorted(
        (factory.bound_max().date(), name)
        for name, factory in _default_calendar_factories.items()
        if factory.bound_max() is not None
    )
    for bound, name in bounded:
        start = (bound - timedelta(days=14)).isoformat()
        if xc.get_calendar(name, start=start, end=bound.isoformat()).break_start_times:
            return name, bound
    pytest.skip("exchange_calendars has no bounded calendar with a lunch break any more")


def library_sessions(name: str, first: date, last: date) -> list[tuple[int, ...]]:
    """The library's own sessions as (label, open, break start, break end, close) epoch ms
    (break fields 0 where there is none)."""
    schedule = xc.get_calendar(name, start=first.isoformat(), end=last.isoformat()).schedule

    def stamp(value: object) -> int:
        return 0 if pd.isna(value) else int(pd.Timestamp(value).timestamp()) * 1000

    return [
        (ms(label.date()), *(stamp(row[c]) for c in ("open", "break_start", "break_end", "close")))
        for label, row in schedule.iterrows()
    ]


def sessions_of(
    calendar: TradingCalendar, first: date, last: date, zone: str
) -> list[tuple[int, ...]]:
    """A TradingCalendar's sessions dated first .. last, in library_sessions' shape: a
    session's intervals are those opening on its date in the exchange's zone."""
    by_date: dict[int, list[int]] = {}
    for open_, close in calendar.intervals_ms.tolist():
        day = from_epoch_ms(open_).astimezone(ZoneInfo(zone)).date()
        if first <= day <= last:
            by_date.setdefault(ms(day), []).extend((open_, close))
    assert sorted(by_date) == [int(x) for x in calendar.session_labels_ms if x in by_date]
    out = []
    for label, times in sorted(by_date.items()):
        if len(times) == 4:
            out.append((label, *times))
        else:
            out.append((label, times[0], 0, 0, times[1]))
    return out


# -- a real bounded calendar across its end -------------------------------------------------


@pytest.fixture(scope="module")
def across_end() -> tuple[str, date, TradingCalendar]:
    name, bound = bounded_with_lunch()
    calendar = build_calendar(name, ms(bound - timedelta(days=60)), ms(bound + timedelta(days=60)))
    return name, bound, calendar


def test_past_its_end_a_calendar_runs_on_the_regular_week_of_its_last_sessions(across_end):
    name, bound, calendar = across_end
    known = library_sessions(name, bound - timedelta(days=28), bound)
    # Where the library ends: the close of its last session (the library's own figure).
    assert calendar.known_until_ms == known[-1][-1]
    # The sessions it knows are the library's, to the last.
    zone = ZoneInfo(calendar.timezone)
    assert sessions_of(calendar, bound - timedelta(days=28), bound, zone.key) == known
    # Past it: every day of the exchange's week is a session with the regular times of its
    # last known session (a full one, with its lunch break), in the exchange's own time.
    weekmask = xc.get_calendar(name, start=(bound - timedelta(days=28)).isoformat()).weekmask
    local = [from_epoch_ms(t).astimezone(zone).time() for t in known[-1][1:]]
    after = sessions_of(calendar, bound + timedelta(days=1), bound + timedelta(days=28), zone.key)
    days = [bound + timedelta(days=n) for n in range(1, 29)]
    assert [from_epoch_ms(s[0]).date() for s in after] == [
        d for d in days if weekmask[d.weekday()] == "1"
    ]
    for session in after:
        day = from_epoch_ms(session[0]).date()
        assert list(session[1:]) == [ms(day, t, zone.key) for t in local], day
    # Joined without a gap or an overlap.
    opens = calendar.intervals_ms[:, 0]
    assert np.all(opens[1:] >= calendar.intervals_ms[:-1, 1])
    assert after[0][1] > calendar.known_until_ms


def test_bar_grid_next_bar_and_session_time_go_on_past_the_end(across_end):
    *_, calendar = across_end
    last_close = calendar.known_until_ms
    first_regular = calendar.intervals_ms[calendar.intervals_ms[:, 0] >= last_close][0]
    # The tick after the last known close is the first regular session's first bar end.
    assert calendar.next_bar_end(M5, last_close) == first_regular[0] + 5 * 60_000
    # A regular session holds as many 5-minute bars as the last known one: none in the break.
    last_day = from_epoch_ms(last_close).date()
    known_bars = calendar.count_bar_starts(M5, ms(last_day), ms(last_day) + DAY_MS)
    first_day = from_epoch_ms(int(first_regular[0])).date()
    assert calendar.count_bar_starts(M5, ms(first_day), ms(first_day) + DAY_MS) == known_bars
    starts = calendar.bar_starts(M5, ms(first_day), ms(first_day) + DAY_MS)
    lunch = calendar.intervals_ms[calendar.intervals_ms[:, 0] >= last_close][:2]
    assert not np.any((starts >= lunch[0][1]) & (starts < lunch[1][0]))  # none at lunch
    # Trading time across the end counts both sides' sessions.
    both = calendar.session_ms_between(last_close - 3_600_000, int(first_regular[1]))
    assert both == 3_600_000 + int(first_regular[1] - first_regular[0])
    # Bars counted back from past the end reach into the known sessions.
    back = calendar.count_bar_starts(H1, ms(first_day), ms(first_day) + DAY_MS) + 1
    assert calendar.bar_start_before(H1, ms(first_day) + DAY_MS, back) < last_close


def test_a_span_wholly_past_the_end_is_the_regular_week(across_end):
    name, bound, _ = across_end
    later = bound + timedelta(days=800)
    calendar = build_calendar(name, ms(later), ms(later + timedelta(days=20)))
    known = library_sessions(name, bound - timedelta(days=28), bound)
    assert calendar.known_until_ms == known[-1][-1]
    monday = later + timedelta(days=(7 - later.weekday()) % 7)
    assert calendar.next_bar_end(M5, ms(monday)) > ms(monday)


def test_replayed_bars_past_the_end_fit_with_a_caveat(across_end):
    name, bound, calendar = across_end
    starts = calendar.bar_starts(M5, ms(bound - timedelta(days=10)), ms(bound + timedelta(days=10)))
    fit = fit_calendar(name, starts, M5, naive=False, builder=CalendarBuilder())
    assert fit.in_session == 1.0
    assert fit.missing == 0
    assert f"are judged on {REGULAR}" in fit.explanation
    assert "upgrade exchange_calendars" in fit.explanation
    # Bars that end before it carry no caveat.
    early = starts[starts < calendar.known_until_ms - 2 * DAY_MS]
    assert "judged on" not in fit_calendar(name, early, M5, naive=False).explanation


# -- a live daemon's calendars across the end ------------------------------------------------


def test_live_calendars_warn_within_30_days_then_run_on_and_say_so_once(across_end):
    name, bound, _ = across_end
    start = from_epoch_ms(ms(bound)) - timedelta(days=3)
    calendars = SymbolCalendars.named({"A/CNY": name}, start, H1, 64)
    [notice] = calendars.notices(start)
    assert not notice.ended
    assert notice.fields()["calendar"] == name
    assert notice.runs_on == f"will run on {REGULAR} after it"
    assert "upgrade exchange_calendars" in notice.text()
    later = start + timedelta(days=10)
    with capture_logs() as logs:
        calendars.cover(later)
        calendars.cover(later + timedelta(hours=1))
    said = [log for log in logs if log["event"] == "calendar past its known sessions"]
    assert len(said) == 1
    assert said[0]["calendar"] == name
    assert said[0]["runs_on"] == f"runs on {REGULAR} since then"
    # The calendar goes on: the next tick, and one a year and more later (rebuilt ahead).
    calendar = calendars["A/CNY"]
    assert calendar.next_bar_end(H1, ms(later.date())) > ms(later.date())
    far = later + timedelta(days=500)
    calendars.cover(far)
    assert calendars["A/CNY"].covers(ms(far.date()), ms((far + REBUILD_BEFORE).date()))
    assert calendars["A/CNY"].known_until_ms == calendar.known_until_ms


def test_readiness_says_the_fallback_and_stays_quiet_far_from_it(across_end):
    name, bound, calendar = across_end
    end = known_end(calendar)
    before, after = ms(bound) - 90 * DAY_MS, ms(bound) + 5 * DAY_MS
    assert notices([end], before) == []
    assert readiness([end], before).startswith(f"sessions known: {name} to {bound:%Y-%m-%d}")
    assert f"runs on {REGULAR} since then" in readiness([end], after)
    # A replay that reaches past the end is told so at its start, months before it.
    assert notices([end], before, until_ms=after)[0].ended is False
    always = known_end(build_calendar("continuous", 0, 0))
    assert always.last_session_ms == math.inf
    assert not always.fallback(after)


# -- summer time past the end: XLON made to end before its spring change ------------------------

LONDON_END = date(2027, 3, 19)  # a Friday; London's clocks go forward on Sunday 2027-03-28


class _EndingXLON(XLONExchangeCalendar):
    @classmethod
    def bound_max(cls) -> pd.Timestamp:
        return pd.Timestamp(LONDON_END)


@pytest.fixture
def ending_london() -> Iterator[str]:
    xc.register_calendar_type("XLON_ENDING", _EndingXLON, force=True)
    yield "XLON_ENDING"
    xc.deregister_calendar("XLON_ENDING")


def test_the_regular_week_keeps_local_hours_over_a_dst_change(ending_london):
    first, last = LONDON_END + timedelta(days=1), date(2027, 4, 9)
    calendar = build_calendar(ending_london, ms(LONDON_END) - 30 * DAY_MS, ms(last))
    regular = sessions_of(calendar, first, last, "Europe/London")
    real = library_sessions("XLON", first, last)
    # The real XLON's sessions, every one, at the same instants: 08:00 London is 08:00 UTC
    # before the change and 07:00 UTC after it.
    assert set(real) <= set(regular)
    monday = date(2027, 4, 5)
    assert next(s for s in regular if s[0] == ms(monday))[1] == ms(monday, time(7))
    # ... and the holidays the regular week cannot know (Good Friday, Easter Monday 2027).
    extra = sorted(from_epoch_ms(s[0]).date() for s in set(regular) - set(real))
    assert extra == [date(2027, 3, 26), date(2027, 3, 29)]


@pytest.mark.parametrize("name", ["XNYS", "XTKS", "XHKG", "XLON"])
def test_the_regular_week_is_the_library_s_year_less_its_holidays_and_short_days(name):
    """Over a whole year: every library session of regular hours is a regular-week session
    at the same instants; every other regular-week day is a library holiday."""
    first, last = date(2025, 1, 1), date(2025, 12, 31)
    library = xc.get_calendar(name, start=first.isoformat(), end=last.isoformat())
    week = RegularWeek.of(library)
    intervals, labels, _ = week.sessions(first, last)
    real = library_sessions(name, first, last)
    as_calendar = TradingCalendar(name, "UTC", intervals, labels, ms(first), ms(last) + DAY_MS)
    mine = sessions_of(as_calendar, first, last, str(library.tz))
    special = {
        ms(d.date())
        for d in list(library.early_closes) + list(library.late_opens)
        if first <= d.date() <= last
    }
    assert [s for s in real if s[0] not in special] == [
        s for s in mine if s[0] in {r[0] for r in real} and s[0] not in special
    ]
    # The library's holidays on its trading days of the week (its list holds weekends too).
    holidays = {
        ms(day)
        for day in pd.DatetimeIndex(library.day.holidays).date
        if first <= day <= last and np.is_busday(day, weekmask=library.weekmask)
    }
    assert {s[0] for s in mine} - {r[0] for r in real} == holidays
    assert holidays  # each of these exchanges closes on some weekday of a year


def test_a_session_that_opens_the_evening_before_joins_after_the_last_known_close():
    """CME Globex's regular week (Sunday to Friday, 17:00 the evening before to 16:00 Chicago,
    exchange_calendars' CMES: open_offset -1), made here: 4.13 cannot build CMES itself."""
    week = RegularWeek(
        "CMES", "America/Chicago", "1111100", ((None, time(17)),), ((None, time(16)),),
        open_offset=-1,
    )  # fmt: skip
    monday, tuesday = date(2027, 1, 11), date(2027, 1, 12)
    intervals, labels, breaks = week.sessions(monday, tuesday)
    assert intervals == [
        [
            ms(date(2027, 1, 10), time(17), "America/Chicago"),
            ms(monday, time(16), "America/Chicago"),
        ],
        [ms(monday, time(17), "America/Chicago"), ms(tuesday, time(16), "America/Chicago")],
    ]
    assert (labels, breaks) == ([ms(monday), ms(tuesday)], False)
    # A last known session closing Monday 16:30 leaves Monday's, not Tuesday's, out.
    known_until = ms(monday, time(16, 30), "America/Chicago")
    later, later_labels, _ = week.sessions(monday, tuesday, not_before_ms=known_until)
    assert (later, later_labels) == (intervals[1:], [ms(tuesday)])
