"""/readyz's "data" check judges a daemon late against the tick that is due, not the last one
it ran: a stock daemon on daily bars over a weekend (its last tick Friday's close, the next due
Monday's) is not stale, and the same daemon past Monday's due tick is.

Sessions: XNYS, Friday 2026-11-20 to Monday 2026-11-23 (exchange_calendars' XNYS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from tests.unit.service.test_parts import parts
from trader.clock import SimulatedClock
from trader.engine.report import TickReport
from trader.service.health import data_check

FRIDAY_CLOSE = datetime(2026, 11, 20, 21, 0, 30, tzinfo=UTC)  # 16:00 New York + 30 s settle
MONDAY_CLOSE = datetime(2026, 11, 23, 21, 0, 30, tzinfo=UTC)


def daemon_at(now: datetime) -> tuple[bool, str]:
    made = parts(
        market={"symbols": ["AAPL/USD"], "timeframe": "1d"},
        schedule={"settle_delay_s": 30, "misfire_grace_s": 600},
        broker={"currency": "USD"},
    )
    made.venue = SimpleNamespace(kind="live", clock=SimulatedClock(now))  # type: ignore[assignment]
    made.last_report = TickReport(FRIDAY_CLOSE, ready=["AAPL/USD"])
    made.ticks = SimpleNamespace(due=MONDAY_CLOSE)  # type: ignore[assignment]
    return data_check(made)


def test_a_weekend_with_no_tick_due_is_not_stale():
    _, detail = daemon_at(datetime(2026, 11, 22, 18, 0, tzinfo=UTC))  # Sunday
    assert "no tick since" not in detail, detail


def test_a_tick_overdue_past_its_grace_is_stale():
    ok, detail = daemon_at(MONDAY_CLOSE + timedelta(seconds=631))
    assert not ok
    assert "no tick since 2026-11-20T21:00:30+00:00 (one was due 2026-11-23T21:00:30" in detail


def test_a_tick_still_within_its_grace_is_not():
    _, detail = daemon_at(MONDAY_CLOSE + timedelta(seconds=629))
    assert "no tick since" not in detail, detail


def test_a_perpetual_valued_on_an_old_mark_is_not_fresh():
    made = parts(market={"symbols": ["BTC/USDT:USDT"], "timeframe": "1h"})
    made.venue = SimpleNamespace(kind="replay", clock=SimulatedClock(MONDAY_CLOSE))  # type: ignore[assignment]
    read = MONDAY_CLOSE - timedelta(hours=1)
    made.last_report = TickReport(MONDAY_CLOSE, stale_marks={"BTC/USDT:USDT": read})
    ok, detail = data_check(made)
    assert not ok
    assert detail == (
        "BTC/USDT:USDT: valued on the mark read at 2026-11-23T20:00:30+00:00 (the venue's mark "
        "could not be read at the last tick)"
    )
