"""Calendars against recorded market data and the real exchange_calendars: which market a file
follows, and the exact figures it gives (missing bars, bars a year)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import backtesting
import exchange_calendars as xc
import numpy as np
import pyarrow.csv as pacsv
import pytest
from exchange_calendars.calendar_utils import _default_calendar_factories

from tests.recorded import SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.domain import Timeframe
from trader.market.calendars.calendar import CalendarRangeError
from trader.market.calendars.fit import (
    DEFAULT_CANDIDATES,
    CalendarFit,
    fit_calendar,
    infer_calendar,
)
from trader.market.calendars.fx import FX
from trader.market.calendars.registry import (
    CONTINUOUS,
    CalendarBuilder,
    build_calendar,
    calendar_names,
)
from trader.market.calendars.wall_clock import wall_to_utc

BACKTESTING = Path(backtesting.__file__).parent / "test"
M5, H1, D1 = Timeframe("5m"), Timeframe("1h"), Timeframe("1d")


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()) * 1000


def read_times(path: Path, column: str) -> np.ndarray:
    """A CSV's time column as epoch ms, naive times taken as UTC."""
    values = pacsv.read_csv(path).column(column).to_numpy()
    return np.asarray(values).astype("datetime64[ms]").astype(np.int64)


@pytest.fixture(scope="module")
def builder() -> CalendarBuilder:
    """One per module: each real calendar is built once."""
    return CalendarBuilder()


# -- Shanghai, 5-minute bars, naive Beijing times stamped at bar end ---------------------------


@pytest.fixture(scope="module")
def xshg_times() -> np.ndarray:
    return read_times(XSHG_600977_5MIN, "timestamps")


@pytest.fixture(scope="module")
def xshg(xshg_times: np.ndarray, builder: CalendarBuilder) -> CalendarFit:
    return infer_calendar(xshg_times, M5, naive=True, builder=builder)


def test_shanghai_is_inferred_with_beijing_bar_ends(xshg: CalendarFit) -> None:
    assert xshg.calendar.name == "XSHG"
    assert xshg.calendar.anchor == "clock"
    assert (xshg.timezone, xshg.label) == ("Asia/Shanghai", "end")
    assert (xshg.in_session, xshg.expected, xshg.missing) == (1.0, 1500, 0)
    assert xshg.explanation == (
        "XSHG inferred: 100.0% of 1,500 bars in its sessions, 0 of 1,500 expected bars missing;"
        " naive times read as Asia/Shanghai bar ends (as UTC starts only 0.0% fit)"
    )
    # 2024-06-18 11:15 Beijing, a bar end: the bar started 11:10 Beijing, 03:10 UTC.
    assert xshg.starts_ms[0] == ms(2024, 6, 18, 3, 10)


def test_shanghai_breaks_are_not_gaps(xshg: CalendarFit) -> None:
    starts, calendar = xshg.starts_ms, xshg.calendar
    # The last bar of the morning (11:30 end label) and the first of the afternoon (13:05).
    morning = np.flatnonzero(starts == ms(2024, 6, 19, 3, 25))[0]
    assert starts[morning + 1] == ms(2024, 6, 19, 5)
    assert calendar.missing_between(M5, int(starts[morning]), int(starts[morning + 1])) == 0
    evening = np.flatnonzero(starts == ms(2024, 6, 19, 6, 55))[0]
    assert starts[evening + 1] == ms(2024, 6, 20, 1, 30)
    assert calendar.missing_between(M5, int(starts[evening]), int(starts[evening + 1])) == 0
    assert calendar.count_bar_starts(M5, ms(2024, 6, 19), ms(2024, 6, 20)) == 48


def test_shanghai_bars_a_year_are_its_2024_sessions_times_48(xshg: CalendarFit) -> None:
    result = xshg.calendar.bars_per_year(M5)
    sessions_2024 = xshg.calendar.count_bar_starts(D1, ms(2024, 1, 1), ms(2025, 1, 1))
    assert sessions_2024 == 242
    assert result.periods == 242 * 48 == 11_616
    assert result.explanation == (
        "XSHG: 242.0 sessions a year x 48 bars of 5m (lunch break excluded)"
        " = 11,616 bars a year (2024)"
    )


def test_a_bar_removed_from_a_shanghai_session_is_missing(
    xshg_times: np.ndarray, builder: CalendarBuilder
) -> None:
    holed = np.delete(xshg_times, 700)  # mid-session: neither a break nor a night
    named = fit_calendar("XSHG", holed, M5, naive=True, builder=builder)
    assert (named.missing, named.expected, named.label) == (1, 1500, "end")
    assert infer_calendar(holed, M5, naive=True, builder=builder).missing == 1


def test_times_read_only_as_utc_fit_shanghai_poorly(
    xshg_times: np.ndarray, builder: CalendarBuilder
) -> None:
    fit = fit_calendar("XSHG", xshg_times, M5, naive=False, builder=builder)
    assert fit.in_session == 0.0
    assert "a poor fit: 100.0% of the bars fall outside its sessions" in fit.explanation


def test_the_shanghai_recording_is_inferred_without_a_shared_builder(
    xshg_times: np.ndarray,
) -> None:
    fit = infer_calendar(xshg_times, M5, naive=True)
    assert (fit.calendar.name, fit.timezone, fit.label) == ("XSHG", "Asia/Shanghai", "end")
    assert (fit.expected, fit.missing) == (len(xshg_times), 0)


# -- Google, daily, plain dates ------------------------------------------------------------------


@pytest.fixture(scope="module")
def goog_times() -> np.ndarray:
    return read_times(BACKTESTING / "GOOG.csv", "")


@pytest.fixture(scope="module")
def goog(goog_times: np.ndarray, builder: CalendarBuilder) -> CalendarFit:
    return infer_calendar(goog_times, D1, naive=True, builder=builder)


def test_google_daily_is_the_nyse_with_nothing_missing(goog: CalendarFit) -> None:
    assert (goog.calendar.name, goog.timezone, goog.label) == ("XNYS", "UTC", "start")
    assert (goog.in_session, goog.expected, goog.missing) == (1.0, 2148, 0)
    assert goog.explanation == (
        "XNYS inferred: 100.0% of 2,148 bars in its sessions, 0 of 2,148 expected bars missing"
    )


def test_nyse_weekends_and_holidays_are_not_missing(
    goog: CalendarFit, goog_times: np.ndarray
) -> None:
    calendar = goog.calendar
    friday, monday = ms(2012, 7, 6), ms(2012, 7, 9)
    assert {friday, monday} <= set(goog_times.tolist())
    assert calendar.missing_between(D1, friday, monday) == 0
    independence_day = ms(2012, 7, 4)
    assert independence_day not in set(goog_times.tolist())
    assert not calendar.is_bar_start(D1, independence_day)
    assert calendar.missing_between(D1, ms(2012, 7, 3), ms(2012, 7, 5)) == 0
    # Hurricane Sandy closed the exchange on 2012-10-29 and 30.
    assert calendar.missing_between(D1, ms(2012, 10, 26), ms(2012, 10, 31)) == 0


def test_nyse_bars_a_year_average_2004_to_2013(goog: CalendarFit) -> None:
    result = goog.calendar.bars_per_year(D1)
    assert result.periods == 2517 / 10 == 251.7
    assert result.explanation == (
        "XNYS: 251.7 sessions a year x 1 bar of 1d = 251.7 bars a year (2004-2013)"
    )


def test_a_24_7_reading_of_google_misses_its_weekends(
    goog_times: np.ndarray, builder: CalendarBuilder
) -> None:
    fit = fit_calendar(CONTINUOUS, goog_times, D1, naive=True, builder=builder)
    # 3,117 days from 2004-08-19 to 2013-03-01: 969 without a bar (31%; weekends are 2/7).
    assert (fit.expected, fit.missing) == (3117, 969)


# -- EUR/USD, hourly, UTC --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eurusd_times() -> np.ndarray:
    return read_times(BACKTESTING / "EURUSD.csv", "")


@pytest.fixture(scope="module")
def eurusd(eurusd_times: np.ndarray, builder: CalendarBuilder) -> CalendarFit:
    return infer_calendar(eurusd_times, H1, naive=True, builder=builder)


def test_eurusd_is_the_fx_week(eurusd: CalendarFit, eurusd_times: np.ndarray) -> None:
    assert (eurusd.calendar.name, eurusd.timezone, eurusd.label) == (FX, "UTC", "start")
    assert (eurusd.expected, eurusd.missing) == (4998, 0)
    assert eurusd.in_session == 4998 / 5000
    # Two stray bars at 17:00 New York on a Friday, after the week's close.
    off = eurusd_times[~eurusd.calendar.expected_mask(H1, eurusd_times)]
    assert off.tolist() == [ms(2017, 10, 6, 21), ms(2017, 10, 20, 21)]
    assert eurusd.explanation == (
        "fx inferred: 99.96% of 5,000 bars in its sessions (2 outside),"
        " 0 of 4,998 expected bars missing"
    )


def test_eurusd_weeks_and_christmas(eurusd: CalendarFit, eurusd_times: np.ndarray) -> None:
    calendar, held = eurusd.calendar, set(eurusd_times.tolist())
    # Friday's last bar (20:00 UTC in summer, 21:00 in winter) to Sunday's first.
    assert {
        ms(2017, 7, 7, 20),
        ms(2017, 7, 9, 21),
        ms(2017, 12, 8, 21),
        ms(2017, 12, 10, 22),
    } <= held
    assert calendar.missing_between(H1, ms(2017, 7, 7, 20), ms(2017, 7, 9, 21)) == 0
    assert calendar.missing_between(H1, ms(2017, 12, 8, 21), ms(2017, 12, 10, 22)) == 0
    # Christmas Day (a Monday) and New Year's Day 2018 (a Monday): closed until 17:00 New York.
    assert {ms(2017, 12, 22, 21), ms(2017, 12, 25, 22), ms(2018, 1, 1, 22)} <= held
    assert calendar.missing_between(H1, ms(2017, 12, 22, 21), ms(2017, 12, 25, 22)) == 0
    assert calendar.missing_between(H1, ms(2017, 12, 29, 21), ms(2018, 1, 1, 22)) == 0


def test_fx_bars_a_year(eurusd: CalendarFit) -> None:
    result = eurusd.calendar.bars_per_year(H1)
    # 52.18 weeks x 120 bars less the closed days: 2017 had 260 weekdays, Christmas among
    # them; 2018 had 261, Christmas and New Year's Day among them: 259 sessions each.
    assert result.periods == 259 * 24 == 6216
    assert result.explanation == (
        "fx: 259.0 sessions a year x 24 bars of 1h = 6,216 bars a year (2017-2018)"
    )


def test_a_24_7_reading_of_eurusd_misses_its_weekends(
    eurusd_times: np.ndarray, builder: CalendarBuilder
) -> None:
    fit = fit_calendar(CONTINUOUS, eurusd_times, H1, naive=True, builder=builder)
    assert (fit.expected, fit.missing) == (7063, 2063)


# -- crypto ----------------------------------------------------------------------------------------


class Untouchable(tuple[str, ...]):
    def __iter__(self) -> Iterator[str]:
        raise AssertionError("a continuous market must not try exchange calendars")


def test_crypto_is_continuous_without_building_an_exchange_calendar() -> None:
    times = read_times(SOLUSDT_1H_2022, "timestamps")
    builder = CalendarBuilder()
    fit = infer_calendar(times, H1, naive=True, candidates=Untouchable(), builder=builder)
    assert fit.calendar.continuous
    assert (fit.calendar.name, fit.timezone, fit.label) == (CONTINUOUS, "UTC", "start")
    assert (fit.expected, fit.missing, fit.in_session) == (2000, 0, 1.0)
    assert builder.exchange_builds == 0
    holed = infer_calendar(np.delete(times, 1000), H1, naive=True, candidates=Untouchable())
    assert holed.calendar.continuous
    assert (holed.expected, holed.missing) == (2000, 1)
    assert holed.explanation == (
        "continuous inferred: 100.0% of 1,999 bars on its grid, 1 of 2,000 expected bars missing"
    )
    assert holed.calendar.bars_per_year(H1).periods == 8766


def test_when_no_calendar_fits_it_is_continuous_and_says_so(builder: CalendarBuilder) -> None:
    times = read_times(SOLUSDT_1H_2022, "timestamps")
    sparse = np.delete(times, np.arange(20, 2000, 40))  # 50 bars gone: 2.5% missing
    fit = infer_calendar(sparse, H1, naive=True, candidates=("XNYS",), builder=builder)
    assert fit.calendar.continuous
    assert fit.explanation.startswith("no calendar fits (nearest: XNYS, ")
    assert fit.explanation.endswith(
        "treated as continuous: 50 of 2,000 expected bars missing (2.5%)"
    )


# -- names and spans -------------------------------------------------------------------------------


def test_calendar_names_and_aliases(builder: CalendarBuilder) -> None:
    names = calendar_names()
    assert names[:2] == [CONTINUOUS, FX]
    assert {"XNYS", "XSHG", "XLON"} <= set(names)
    assert "24/7" not in names
    assert set(DEFAULT_CANDIDATES) <= set(names)
    span = (ms(2012, 3, 1), ms(2012, 4, 1))
    assert builder.build("nyse", *span).name == "XNYS"
    assert builder.build("xnys", *span).name == "XNYS"
    assert build_calendar("24/7", 0, 0).continuous
    assert build_calendar("Forex", *span).name == FX
    assert build_calendar("24/5", *span).name == FX
    with pytest.raises(ValueError, match=r"did you mean .*XNYS"):
        build_calendar("XNYZ", *span)


def test_spans_are_whole_years_within_what_the_exchange_allows() -> None:
    builder = CalendarBuilder()
    calendar = builder.build("XNYS", ms(2012, 3, 1), ms(2012, 4, 1))
    assert calendar.span_ms == (ms(2012, 1, 1), ms(2013, 1, 1))
    assert builder.build("XNYS", ms(2012, 6, 1), ms(2012, 7, 1), "session").span_ms == (
        calendar.span_ms
    )
    with pytest.raises(CalendarRangeError, match=r"XNYS calendar spans 2012-01-01 00:00 \.\."):
        calendar.is_bar_start(M5, ms(2013, 1, 2, 15))
    with pytest.raises(ValueError, match=r"before XSHG's first known session \(1990-12-03\)"):
        builder.build("XSHG", ms(1985, 1, 1), ms(1992, 1, 1))
    # Shanghai's holidays are known to a year's end only (2026 in exchange_calendars 4.13):
    # the span goes on past it, on the regular week, and says where the known sessions end.
    bound = _default_calendar_factories["XSHG"].bound_max()
    if bound is None:
        pytest.skip("exchange_calendars knows XSHG's sessions without end now")
    year = bound.year
    late = builder.build("XSHG", ms(year, 6, 1), ms(year + 2, 1, 1))
    assert late.span_ms == (ms(year, 1, 1), ms(year + 2, 1, 1))
    last = xc.get_calendar("XSHG", start=f"{year}-12-01", end=bound.date().isoformat())
    assert late.known_until_ms == int(last.schedule["close"].iloc[-1].timestamp()) * 1000


def test_a_builder_keeps_what_it_built() -> None:
    builder = CalendarBuilder()
    first = builder.build("XNYS", ms(2012, 3, 1), ms(2012, 4, 1))
    assert builder.build("XNYS", ms(2012, 9, 1), ms(2012, 10, 1)) is first
    assert builder.build("XNYS", ms(2012, 9, 1), ms(2012, 10, 1), "session").anchor == "session"
    assert builder.exchange_builds == 1


def test_wall_clock_times_are_read_across_summer_time() -> None:
    wall = np.array(
        [ms(2024, 3, 8, 9, 30), ms(2024, 3, 11, 9, 30), ms(2024, 3, 10, 1, 45)], dtype=np.int64
    )
    assert wall_to_utc(wall, "America/New_York").tolist() == [
        ms(2024, 3, 8, 14, 30),  # EST
        ms(2024, 3, 11, 13, 30),  # EDT
        ms(2024, 3, 10, 6, 45),  # the last quarter hour before the change
    ]
