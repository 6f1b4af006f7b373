"""TradingCalendar: the bars a market expects, over hand-made sessions (checked against a
brute-force enumeration), over real exchange sessions, and for a 24/7 market by arithmetic."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trader.domain import Timeframe, from_epoch_ms
from trader.market.calendars.bars_per_year import BarsPerYear
from trader.market.calendars.calendar import NO_BAR_END, CalendarRangeError, TradingCalendar
from trader.market.calendars.registry import build_calendar

M1, M5, H1, D1, W1 = (Timeframe(t) for t in ("1m", "5m", "1h", "1d", "1w"))
MINUTE, HOUR = 60_000, 3_600_000


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()) * 1000


def jan(day: int, hour: int = 0, minute: int = 0) -> int:
    return ms(2024, 1, day, hour, minute)


# Shanghai-like sessions in UTC, 01:30-03:30 and 05:00-07:00, on the weekdays of January 2024
# (Monday the 1st on), except a holiday on Wednesday the 10th and a closed week from the 15th.
CLOSED = {10, 15, 16, 17, 18, 19}
LUNCH_DAYS = [d for d in range(1, 27) if datetime(2024, 1, d).weekday() < 5 and d not in CLOSED]
LUNCH_INTERVALS = [
    interval
    for d in LUNCH_DAYS
    for interval in ((jan(d, 1, 30), jan(d, 3, 30)), (jan(d, 5), jan(d, 7)))
]
SPAN = (jan(1), jan(29))


def lunch(anchor: str = "clock") -> TradingCalendar:
    return TradingCalendar(
        "LUNCH",
        "Asia/Shanghai",
        LUNCH_INTERVALS,
        [jan(d) for d in LUNCH_DAYS],
        *SPAN,
        anchor=anchor,  # type: ignore[arg-type]
        has_breaks=True,
    )


# New York-like sessions, 09:30-16:00 EST = 14:30-21:00 UTC, on every weekday of January 2024.
OPEN_DAYS = [d for d in range(1, 29) if datetime(2024, 1, d).weekday() < 5]
OPEN_INTERVALS = [(jan(d, 14, 30), jan(d, 21)) for d in OPEN_DAYS]


def nyse_like(anchor: str = "clock") -> TradingCalendar:
    return TradingCalendar(
        "OPEN",
        "America/New_York",
        OPEN_INTERVALS,
        [jan(d) for d in OPEN_DAYS],
        *SPAN,
        anchor=anchor,  # type: ignore[arg-type]
    )


# -- a session with a lunch break ------------------------------------------------------------


def test_five_minute_bars_skip_the_lunch_break_and_the_night() -> None:
    calendar = lunch()
    monday = calendar.bar_starts(M5, jan(1), jan(2))
    assert len(monday) == 48
    assert monday[0] == jan(1, 1, 30)
    assert monday[23] == jan(1, 3, 25)  # last of the morning
    assert monday[24] == jan(1, 5)  # first of the afternoon
    assert monday[-1] == jan(1, 6, 55)
    assert calendar.missing_between(M5, jan(1, 3, 25), jan(1, 5)) == 0
    assert calendar.missing_between(M5, jan(1, 6, 55), jan(2, 1, 30)) == 0  # the night
    assert calendar.missing_between(M5, jan(5, 6, 55), jan(8, 1, 30)) == 0  # the weekend
    assert calendar.missing_between(M5, jan(9, 6, 55), jan(11, 1, 30)) == 0  # the holiday
    assert calendar.missing_between(M5, jan(12, 6, 55), jan(22, 1, 30)) == 0  # the closed week
    assert calendar.missing_between(M5, jan(1, 1, 30), jan(1, 1, 45)) == 2
    assert calendar.missing_between(M5, jan(1, 3, 20), jan(1, 5, 5)) == 2
    assert calendar.missing_between(M5, jan(1, 5), jan(1, 5)) == 0


def test_bar_starts_are_only_session_times() -> None:
    calendar = lunch()
    assert calendar.is_bar_start(M5, jan(1, 3, 25))
    assert not calendar.is_bar_start(M5, jan(1, 3, 30))  # lunch
    assert calendar.is_bar_start(M5, jan(1, 5))
    assert not calendar.is_bar_start(M5, jan(1, 5, 1))  # off the grid
    assert not calendar.is_bar_start(M5, jan(6, 2))  # Saturday
    assert not calendar.is_bar_start(M5, jan(10, 2))  # the holiday
    times = np.array([jan(1, 3, 25), jan(1, 3, 30), jan(1, 5), jan(6, 2)], dtype=np.int64)
    assert calendar.expected_mask(M5, times).tolist() == [True, False, True, False]
    assert calendar.count_bar_starts(M5, *SPAN) == 48 * len(LUNCH_DAYS)


def test_bar_ends_step_over_breaks_and_weekends() -> None:
    calendar = lunch()
    assert calendar.next_bar_end(M5, jan(1, 3, 29)) == jan(1, 3, 30)
    assert calendar.next_bar_end(M5, jan(1, 3, 30)) == jan(1, 5, 5)  # strictly after
    assert calendar.next_bar_end(M5, jan(5, 7)) == jan(8, 1, 35)  # Friday close -> Monday
    assert calendar.last_bar_end(M5, jan(1, 4)) == jan(1, 3, 30)
    assert calendar.last_bar_end(M5, jan(6, 12)) == jan(5, 7)
    assert calendar.last_bar_end(M5, jan(1, 1, 34)) is None  # no bar of the span ended yet
    times = [jan(1, 4), jan(6, 12), jan(1, 1, 34)]
    assert calendar.last_bar_ends(M5, times).tolist() == [jan(1, 3, 30), jan(5, 7), NO_BAR_END]
    # The last n bars ending by Tuesday 01:40: 01:35 (n=1), 01:30, then Monday's last.
    assert calendar.bar_start_before(M5, jan(2, 1, 40), 1) == jan(2, 1, 35)
    assert calendar.bar_start_before(M5, jan(2, 1, 40), 2) == jan(2, 1, 30)
    assert calendar.bar_start_before(M5, jan(2, 1, 40), 3) == jan(1, 6, 55)
    # An order valid for 3 bars from Monday 06:50: 06:50, 06:55, then Tuesday 01:30.
    assert calendar.bar_end_after(M5, jan(1, 6, 50), 3) == jan(2, 1, 35)
    assert calendar.bar_end_after(M5, jan(1, 3, 31), 1) == jan(1, 5, 5)


def test_session_time_leaves_out_breaks_nights_and_weekends() -> None:
    calendar = lunch()
    assert calendar.session_ms_between(jan(1), jan(2)) == 4 * HOUR
    assert calendar.session_ms_between(jan(1, 3), jan(1, 5, 30)) == HOUR
    assert calendar.session_ms_between(jan(6), jan(8)) == 0
    assert calendar.session_ms_between(jan(1), jan(8)) == 5 * 4 * HOUR
    with pytest.raises(ValueError, match="comes before"):
        calendar.session_ms_between(jan(2), jan(1))


def test_a_clock_bar_over_both_halves_of_a_session_counts_once() -> None:
    calendar = lunch()
    # 3h bars: [00:00, 03:00) the morning, [03:00, 06:00) both halves, [06:00, 09:00) the end.
    assert calendar.bar_starts(Timeframe("3h"), jan(1), jan(2)).tolist() == [
        jan(1, 0),
        jan(1, 3),
        jan(1, 6),
    ]
    hours = calendar.bar_starts(H1, jan(1), jan(2))
    assert hours.tolist() == [jan(1, h) for h in (1, 2, 3, 5, 6)]


# -- clock or session anchor -------------------------------------------------------------------


def test_hourly_bars_on_a_0930_open_follow_the_clock_or_the_open() -> None:
    clock, session = nyse_like(), nyse_like("session")
    assert clock.bar_starts(H1, jan(2), jan(3)).tolist() == [jan(2, h) for h in range(14, 21)]
    assert session.bar_starts(H1, jan(2), jan(3)).tolist() == [jan(2, h, 30) for h in range(14, 21)]
    assert session.is_bar_start(H1, jan(2, 20, 30))  # the short last bar, 15:30-16:00 EST
    assert not session.is_bar_start(H1, jan(2, 15))
    assert not clock.is_bar_start(H1, jan(2, 14, 30))
    assert session.missing_between(H1, jan(2, 20, 30), jan(3, 14, 30)) == 0
    # A bar ends one timeframe after its start, as the daemon closes bars.
    assert session.next_bar_end(H1, jan(2, 21)) == jan(2, 21, 30)
    assert clock.with_anchor("clock") is clock
    assert clock.with_anchor("session").anchor == "session"
    assert clock.with_anchor("session").with_anchor("clock").anchor == "clock"


# -- daily and weekly bars ---------------------------------------------------------------------


def test_daily_bars_are_stamped_with_session_dates() -> None:
    calendar = lunch()
    assert calendar.bar_starts(D1, *SPAN).tolist() == [jan(d) for d in LUNCH_DAYS]
    assert calendar.missing_between(D1, jan(5), jan(8)) == 0  # Friday -> Monday
    assert calendar.missing_between(D1, jan(9), jan(11)) == 0  # over the holiday
    assert calendar.missing_between(D1, jan(12), jan(22)) == 0  # over the closed week
    assert calendar.missing_between(D1, jan(8), jan(11)) == 1  # the 9th
    assert not calendar.is_bar_start(D1, jan(10))
    assert calendar.next_bar_end(D1, jan(9, 12)) == jan(10)
    assert calendar.bar_end_after(D1, jan(9, 12), 1) == jan(12)  # the next bar starts the 11th
    assert calendar.bar_start_before(D1, jan(12, 12), 2) == jan(9)


def test_weekly_bars_are_the_mondays_of_weeks_with_a_session() -> None:
    calendar = lunch()
    assert calendar.bar_starts(W1, *SPAN).tolist() == [jan(1), jan(8), jan(22)]
    assert calendar.missing_between(W1, jan(8), jan(22)) == 0
    assert not calendar.is_bar_start(W1, jan(15))
    assert calendar.last_bar_end(W1, jan(28)) == jan(15)


@pytest.mark.parametrize("text", ["2d", "3d", "36h", "2w", "7d"])
def test_other_multi_day_timeframes_have_no_expected_bars_on_sessions(text: str) -> None:
    with pytest.raises(ValueError, match="no expected bars on a session calendar"):
        lunch().bar_starts(Timeframe(text), *SPAN)
    # A 24/7 market has them: every grid point.
    assert TradingCalendar.always_open().count_bar_starts(Timeframe(text), *SPAN) > 0


# -- the span ----------------------------------------------------------------------------------


def test_asking_outside_the_span_names_the_span() -> None:
    calendar = lunch()
    named = "LUNCH calendar spans 2024-01-01 00:00 .. 2024-01-29 00:00 UTC"
    assert calendar.covers(*SPAN)
    assert not calendar.covers(jan(1) - 1, jan(2))
    with pytest.raises(CalendarRangeError, match=named):
        calendar.bar_starts(M5, ms(2023, 12, 31), jan(2))
    with pytest.raises(CalendarRangeError, match=named):
        calendar.is_bar_start(M5, jan(29))
    with pytest.raises(CalendarRangeError, match=named):
        calendar.missing_between(M5, jan(26), jan(30))
    with pytest.raises(CalendarRangeError, match=named):
        calendar.session_ms_between(jan(1), jan(30))
    with pytest.raises(CalendarRangeError, match="no 5m bar ending after"):
        calendar.next_bar_end(M5, jan(26, 7))
    with pytest.raises(CalendarRangeError, match="fewer than 5 5m bars ending by"):
        calendar.bar_start_before(M5, jan(1, 1, 40), 5)
    with pytest.raises(CalendarRangeError, match="fewer than 2 5m bars from"):
        calendar.bar_end_after(M5, jan(26, 6, 55), 2)
    assert issubclass(CalendarRangeError, ValueError)


def test_malformed_sessions_are_refused() -> None:
    with pytest.raises(ValueError, match="sorted and disjoint"):
        TradingCalendar("BAD", "UTC", [(jan(1, 2), jan(1, 4)), (jan(1, 3), jan(1, 5))], [], *SPAN)
    with pytest.raises(ValueError, match="non-empty"):
        TradingCalendar("BAD", "UTC", [(jan(1, 2), jan(1, 2))], [], *SPAN)
    with pytest.raises(ValueError, match="UTC midnights"):
        TradingCalendar("BAD", "UTC", [], [jan(1, 3)], *SPAN)
    with pytest.raises(ValueError, match="empty span"):
        TradingCalendar("BAD", "UTC", [], [], jan(2), jan(1))
    with pytest.raises(ValueError, match="anchor"):
        lunch().with_anchor("open")  # type: ignore[arg-type]


# -- every method against a brute-force enumeration ---------------------------------------------


def brute_starts(
    intervals: Sequence[tuple[int, int]],
    timeframe: Timeframe,
    anchor: str,
    span: tuple[int, int] = SPAN,
) -> list[int]:
    step = timeframe.seconds * 1000
    if anchor == "session":
        found = [o + k * step for o, c in intervals for k in range(math.ceil((c - o) / step))]
    else:
        grid = range(math.ceil(span[0] / step) * step, span[1], step)
        found = [g for g in grid if any(o < g + step and g < c for o, c in intervals)]
    return sorted(s for s in found if span[0] <= s < span[1])


@pytest.mark.parametrize("anchor", ["clock", "session"])
def test_a_span_edge_inside_a_session_keeps_the_sessions_grid(anchor: str) -> None:
    span = (jan(1, 2), jan(5, 6))
    calendar = TradingCalendar(
        "LUNCH",
        "UTC",
        LUNCH_INTERVALS,
        [jan(d) for d in LUNCH_DAYS],
        *span,
        anchor=anchor,  # type: ignore[arg-type]
    )
    timeframe = Timeframe("25m")
    starts = calendar.bar_starts(timeframe, *span).tolist()
    assert starts == brute_starts(LUNCH_INTERVALS, timeframe, anchor, span)
    if anchor == "session":  # 01:30 + 2 x 25m, and 05:00 + 2 x 25m
        assert (starts[0], starts[-1]) == (jan(1, 2, 20), jan(5, 5, 50))
    assert calendar.session_ms_between(*span) == 5 * 4 * HOUR - 30 * MINUTE - HOUR


@pytest.mark.parametrize("anchor", ["clock", "session"])
@pytest.mark.parametrize("text", ["1m", "5m", "7m", "25m", "1h", "90m", "3h", "8h"])
@pytest.mark.parametrize("which", ["lunch", "nyse_like"])
def test_every_method_agrees_with_brute_force(anchor: str, text: str, which: str) -> None:
    build, intervals = {
        "lunch": (lunch, LUNCH_INTERVALS),
        "nyse_like": (nyse_like, OPEN_INTERVALS),
    }[which]
    calendar, timeframe = build(anchor), Timeframe(text)
    step = timeframe.seconds * 1000
    starts = brute_starts(intervals, timeframe, anchor)
    ends = [s + step for s in starts]
    assert calendar.bar_starts(timeframe, *SPAN).tolist() == starts
    rng = random.Random(f"{which}{anchor}{text}")  # noqa: S311 - reproducible, not secret
    # Random times, plus the expected starts and ends themselves (the edge cases).
    times = [rng.randrange(*SPAN) // MINUTE * MINUTE for _ in range(150)]
    edges = rng.sample(starts, min(25, len(starts))) + rng.sample(ends, min(25, len(ends)))
    times += [t for t in edges if t < SPAN[1]]
    for a in times:
        b = min(SPAN[1], a + rng.randrange(0, 5 * 24 * HOUR))
        assert calendar.bar_starts(timeframe, a, b).tolist() == [s for s in starts if a <= s < b]
        assert calendar.missing_between(timeframe, a, b) == sum(a < s < b for s in starts)
        assert calendar.is_bar_start(timeframe, a) == (a in set(starts))
        assert calendar.session_ms_between(a, b) == sum(
            max(0, min(c, b) - max(o, a)) for o, c in intervals
        )
        later = [e for e in ends if e > a]
        if later:
            assert calendar.next_bar_end(timeframe, a) == later[0]
        else:
            with pytest.raises(CalendarRangeError):
                calendar.next_bar_end(timeframe, a)
        done = [e for e in ends if e <= a]
        assert calendar.last_bar_end(timeframe, a) == (done[-1] if done else None)
        n = rng.randrange(1, 60)
        if len(done) >= n:
            assert calendar.bar_start_before(timeframe, a, n) == done[-n] - step
        else:
            with pytest.raises(CalendarRangeError):
                calendar.bar_start_before(timeframe, a, n)
        ahead = [s for s in starts if s >= a]
        if len(ahead) >= n:
            assert calendar.bar_end_after(timeframe, a, n) == ahead[n - 1] + step
        else:
            with pytest.raises(CalendarRangeError):
                calendar.bar_end_after(timeframe, a, n)
    # Vectorised, as one by one (`NO_BAR_END` for None).
    one_by_one = [calendar.last_bar_end(timeframe, a) for a in times]
    want = [NO_BAR_END if end is None else end for end in one_by_one]
    assert calendar.last_bar_ends(timeframe, times).tolist() == want
    assert calendar.last_bar_ends(timeframe, []).tolist() == []


# -- annualisation -----------------------------------------------------------------------------


def test_bars_per_year_counts_a_whole_year_of_sessions() -> None:
    days = [
        datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=i)
        for i in range(366)
        if (datetime(2024, 1, 1) + timedelta(days=i)).weekday() < 5
    ]
    assert len(days) == 262
    calendar = TradingCalendar(
        "OPEN",
        "America/New_York",
        [(ms(d.year, d.month, d.day, 14, 30), ms(d.year, d.month, d.day, 21)) for d in days],
        [ms(d.year, d.month, d.day) for d in days],
        ms(2024, 1, 1),
        ms(2025, 1, 1),
    )
    assert calendar.bars_per_year(H1) == BarsPerYear(
        1834.0, "OPEN: 262.0 sessions a year x 7 bars of 1h = 1,834 bars a year (2024)"
    )
    assert calendar.bars_per_year(M5).periods == 262 * 78
    assert calendar.with_anchor("session").bars_per_year(H1).periods == 262 * 7
    assert calendar.bars_per_year(D1) == BarsPerYear(
        262.0, "OPEN: 262.0 sessions a year x 1 bar of 1d = 262.0 bars a year (2024)"
    )
    # 2024 has 53 Mondays (the 1st to the 30th of December), each in a week with sessions.
    assert calendar.bars_per_year(W1) == BarsPerYear(
        53.0, "OPEN: 53.0 weeks a year with a session x 1 bar of 1w = 53.0 bars a year (2024)"
    )


def test_bars_per_year_names_the_lunch_break_and_extrapolates_a_short_span() -> None:
    result = lunch().bars_per_year(M5)
    assert result.periods == pytest.approx(48 * len(LUNCH_DAYS) * 365.25 / 28)
    assert "(lunch break excluded)" in result.explanation
    assert "extrapolated from 2024-01-01 .. 2024-01-29" in result.explanation


def test_a_24_7_market_annualises_by_arithmetic() -> None:
    always = TradingCalendar.always_open()
    assert always.bars_per_year(H1) == BarsPerYear(
        8766.0, "24/7 market: 365.25 days x 24 bars of 1h a day = 8,766 bars a year"
    )
    assert always.bars_per_year(D1).periods == 365.25
    assert always.bars_per_year(W1) == BarsPerYear(
        365.25 / 7, "24/7 market: 365.25 days / 7 days a bar of 1w = 52.2 bars a year"
    )


# -- a 24/7 market -----------------------------------------------------------------------------

TIMEFRAMES = ["1s", "1m", "5m", "7m", "1h", "4h", "1d", "3d", "1w", "2w"]


def brute_grid(timeframe: Timeframe, a: int, b: int) -> list[int]:
    """Grid points in [a, b) by Timeframe.floor, one bar at a time."""
    point = timeframe.floor(from_epoch_ms(a))
    if point < from_epoch_ms(a):
        point += timeframe.duration
    found = []
    while point < from_epoch_ms(b):
        found.append(int(point.timestamp()) * 1000)
        point += timeframe.duration
    return found


@given(
    text=st.sampled_from(TIMEFRAMES),
    a=st.integers(-(10**12), 4 * 10**12),
    bars=st.integers(0, 40),
    wobble=st.integers(0, 10**9),
    n=st.integers(1, 30),
)
def test_continuous_arithmetic_agrees_with_brute_force(
    text: str, a: int, bars: int, wobble: int, n: int
) -> None:
    always, timeframe = TradingCalendar.always_open(), Timeframe(text)
    step = timeframe.seconds * 1000
    b = a + bars * step + wobble % step
    grid = brute_grid(timeframe, a, b)
    assert always.bar_starts(timeframe, a, b).tolist() == grid
    assert always.count_bar_starts(timeframe, a, b) == len(grid)
    assert always.missing_between(timeframe, a, b) == len([g for g in grid if g > a])
    assert always.is_bar_start(timeframe, a) == (brute_grid(timeframe, a, a + 1) == [a])
    before = brute_grid(timeframe, a - (n + 1) * step, a + 1)
    following = brute_grid(timeframe, a - step, a + (n + 1) * step)
    assert always.next_bar_end(timeframe, a) == next(g + step for g in following if g + step > a)
    assert always.last_bar_end(timeframe, a) == [g + step for g in before if g + step <= a][-1]
    assert always.last_bar_ends(timeframe, [a, b]).tolist() == [
        always.last_bar_end(timeframe, a),
        always.last_bar_end(timeframe, b),
    ]
    assert always.bar_start_before(timeframe, a, n) == [g for g in before if g + step <= a][-n]
    assert always.bar_end_after(timeframe, a, n) == [g for g in following if g >= a][n - 1] + step
    assert always.session_ms_between(a, b) == b - a


def test_continuous_never_materialises_and_has_no_bounds() -> None:
    always = TradingCalendar.always_open()
    century = ms(2100, 1, 1) - ms(2000, 1, 1)
    assert always.count_bar_starts(Timeframe("1s"), ms(2000, 1, 1), ms(2100, 1, 1)) == (
        century // 1000
    )
    assert always.missing_between(M1, ms(1900, 1, 1), ms(2200, 1, 1)) > 10**8
    assert always.covers(-(10**15), 10**15)
    assert always.continuous
    assert always.span_ms is None
    assert always.timezone == "UTC"


# -- real sessions -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xnys() -> TradingCalendar:
    return build_calendar("XNYS", ms(2012, 1, 1), ms(2012, 12, 31))


@pytest.fixture(scope="module")
def fx() -> TradingCalendar:
    return build_calendar("fx", ms(2017, 1, 1), ms(2019, 12, 31))


def test_nyse_half_days_holidays_and_summer_time(xnys: TradingCalendar) -> None:
    def day(m: int, d: int) -> int:
        return ms(2012, m, d)

    # The day after Thanksgiving closes at 13:00 EST: 42 five-minute bars, not 78.
    assert len(xnys.bar_starts(M5, day(11, 23), day(11, 24))) == 42
    assert len(xnys.bar_starts(M5, day(11, 26), day(11, 27))) == 78
    session = xnys.with_anchor("session")
    assert session.bar_starts(H1, day(11, 23), day(11, 24)).tolist() == [
        ms(2012, 11, 23, h, 30) for h in (14, 15, 16, 17)
    ]
    assert xnys.bar_starts(D1, day(7, 3), day(7, 6)).tolist() == [day(7, 3), day(7, 5)]
    assert xnys.missing_between(D1, day(7, 3), day(7, 5)) == 0  # Independence Day
    assert xnys.missing_between(D1, day(10, 26), day(10, 31)) == 0  # Hurricane Sandy
    assert xnys.bar_starts(M5, day(3, 12), day(3, 13))[0] == ms(2012, 3, 12, 13, 30)  # EDT
    assert xnys.bar_starts(M5, day(3, 9), day(3, 10))[0] == ms(2012, 3, 9, 14, 30)  # EST
    assert xnys.timezone == "America/New_York"
    assert not xnys.continuous


def test_shanghai_lunch_break() -> None:
    xshg = build_calendar("XSHG", ms(2024, 7, 1), ms(2024, 7, 2))
    day = xshg.bar_starts(M5, ms(2024, 7, 1), ms(2024, 7, 2))
    assert len(day) == 48
    assert xshg.missing_between(M5, ms(2024, 7, 1, 3, 25), ms(2024, 7, 1, 5)) == 0
    assert xshg.session_ms_between(ms(2024, 7, 1), ms(2024, 7, 2)) == 4 * HOUR
    assert "(lunch break excluded)" in xshg.bars_per_year(M5).explanation


def test_the_fx_week_follows_new_york_summer_time_and_closes_for_christmas(
    fx: TradingCalendar,
) -> None:
    summer = fx.bar_starts(H1, ms(2017, 7, 1), ms(2017, 7, 8))
    assert (summer[0], summer[-1], len(summer)) == (ms(2017, 7, 2, 21), ms(2017, 7, 7, 20), 120)
    winter = fx.bar_starts(H1, ms(2017, 12, 2), ms(2017, 12, 9))
    assert (winter[0], winter[-1], len(winter)) == (ms(2017, 12, 3, 22), ms(2017, 12, 8, 21), 120)
    # Christmas Day 2017 was a Monday: the week opens at 17:00 New York on the 25th.
    assert fx.bar_starts(H1, ms(2017, 12, 23), ms(2017, 12, 27))[0] == ms(2017, 12, 25, 22)
    assert fx.missing_between(H1, ms(2017, 12, 22, 21), ms(2017, 12, 25, 22)) == 0
    # 2019: Christmas on a Wednesday closes 17:00 Tuesday to 17:00 Wednesday New York time.
    assert fx.missing_between(H1, ms(2019, 12, 24, 21), ms(2019, 12, 25, 22)) == 0
    assert not fx.is_bar_start(H1, ms(2019, 12, 25, 12))
    assert fx.session_ms_between(ms(2019, 12, 22), ms(2019, 12, 29)) == 4 * 24 * HOUR
    # Daily labels are the New York dates of the 17:00 closes: never the 25th or the 1st.
    labels = fx.bar_starts(D1, ms(2017, 12, 22), ms(2018, 1, 3)).tolist()
    assert labels == [ms(2017, 12, d) for d in (22, 26, 27, 28, 29)] + [ms(2018, 1, 2)]
