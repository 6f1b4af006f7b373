"""The measures taken from a record: days or trading sessions on the market's calendar, the
ticks the calendar expected, ticks run halted, drawdown, and skill with its interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np

from trader.domain import Timeframe, to_epoch_ms
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.registry import CalendarBuilder
from trader.promote.days import calendar_of, span_of
from trader.promote.measure import drawdown, halted_ticks
from trader.promote.skill import skill_of
from trader.shortfall.read import StateEvent

HOUR = Timeframe("1h")
MONDAY = datetime(2024, 3, 4, tzinfo=UTC)  # a week with no US holiday


def test_a_24_7_record_counts_utc_days_and_expects_a_tick_every_bar():
    ticks = [MONDAY + timedelta(hours=h) for h in range(1, 24 * 3 + 1)]  # to Thursday 00:00
    span = span_of(ticks, TradingCalendar.always_open(), HOUR)
    # A tick at midnight closes the bar of the day before: three days, 72 ticks.
    assert (span.days, span.sessions, span.expected_ticks) == (3, False, 72)
    missing = ticks[:10] + ticks[20:]
    assert span_of(missing, TradingCalendar.always_open(), HOUR).expected_ticks == 72


def test_a_stock_record_counts_trading_sessions_in_the_exchange_zone():
    nyse = CalendarBuilder().build(
        "XNYS", to_epoch_ms(MONDAY - timedelta(days=30)), to_epoch_ms(MONDAY + timedelta(days=30))
    )
    # Hourly bars on the clock grid: 14:00 (part), 15..20 UTC; closes 15:00..21:00 (EST).
    ticks = []
    for day in range(7):  # Monday to Sunday: five sessions
        date = MONDAY + timedelta(days=day)
        ticks += [
            t
            for h in range(15, 22)
            if nyse.in_session(to_epoch_ms(t := date + timedelta(hours=h)) - 1)
        ]
    span = span_of(ticks, nyse, HOUR)
    assert span.sessions
    assert span.days == 5
    assert span.expected_ticks == nyse.count_bar_starts(
        HOUR, to_epoch_ms(ticks[0] - timedelta(hours=1)), to_epoch_ms(ticks[-1])
    )
    assert span.expected_ticks == len(ticks)  # no session closed in between


def test_the_calendar_is_read_off_the_bars_the_ledger_kept():
    week = [
        to_epoch_ms(MONDAY + timedelta(days=d))
        for d in range(30)
        if (MONDAY + timedelta(days=d)).weekday() < 5
    ]
    ticks = [MONDAY + timedelta(days=1)]
    found = calendar_of(week, Timeframe("1d"), "continuous", ticks)
    assert not found.continuous
    every = [to_epoch_ms(MONDAY + timedelta(hours=h)) for h in range(200)]
    assert calendar_of(every, HOUR, "XNYS", ticks).continuous


def test_ticks_run_while_halted_count_until_trading_resumes():
    ticks = [MONDAY + timedelta(hours=h) for h in range(10)]
    events = [
        StateEvent(MONDAY + timedelta(hours=2), "reducing", "drawdown"),
        StateEvent(MONDAY + timedelta(hours=4), "halted", "daily loss"),
        StateEvent(MONDAY + timedelta(hours=7), "active", "resumed by a person"),
    ]
    assert halted_ticks(ticks, events) == 3  # hours 4, 5, 6
    assert halted_ticks(ticks, []) == 0


def test_drawdown_is_the_deepest_fall_from_a_running_peak():
    curve = [(MONDAY, Decimal(v)) for v in ("100", "120", "90", "130", "117")]
    assert drawdown(curve) == 0.25  # 120 -> 90
    assert drawdown([(MONDAY, Decimal(100))]) == 0.0
    assert drawdown([]) is None


def test_skill_is_one_less_the_crps_ratio_with_a_bootstrap_interval():
    rng = np.random.default_rng(7)
    naive = rng.uniform(1.0, 2.0, 300)
    better = [(0.8 * n, n) for n in naive]  # 20% lower CRPS on every forecast
    skill = skill_of("toto", better, 4, 0.9)
    assert skill.forecasts == 300
    assert abs(skill.estimate - 0.2) < 1e-12
    assert skill.low is not None
    assert skill.high is not None
    assert abs(skill.low - 0.2) < 1e-9
    assert abs(skill.high - 0.2) < 1e-9
    noisy = [(n * f, n) for n, f in zip(naive, rng.uniform(0.5, 1.5, 300), strict=True)]
    mixed = skill_of("toto", noisy, 4, 0.9)
    assert mixed.low < mixed.estimate < mixed.high
    assert skill_of("toto", [], 4, 0.9).estimate is None
    assert skill_of("toto", [(1.0, 2.0)], 4, 0.9).low is None
