"""trader_calendar_last_session_timestamp_seconds and trader_calendar_fallback, read from a live
daemon's real calendars (exchange_calendars) on a clock moved across a calendar's end."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from exchange_calendars.calendar_utils import _default_calendar_factories
from prometheus_client import CollectorRegistry

from trader.clock import SimulatedClock
from trader.config.market_settings import MarketSettings
from trader.domain import Timeframe
from trader.market.calendars.per_symbol import REBUILD_BEFORE, SymbolCalendars
from trader.telemetry.calendar_metrics import CalendarMetrics, configured_calendars

LAST = "trader_calendar_last_session_timestamp_seconds"
FALLBACK = "trader_calendar_fallback"


def sample(registry: CollectorRegistry, name: str, calendar: str) -> float | None:
    return registry.get_sample_value(name, {"calendar": calendar})


def first_to_end() -> tuple[str, datetime]:
    """The exchange_calendars calendar that ends first (XSHG, XBOM and XSES in 4.13)."""
    bound, name = min(
        (f.bound_max(), n) for n, f in _default_calendar_factories.items() if f.bound_max()
    )
    return name, bound.to_pydatetime().replace(tzinfo=UTC)


def test_the_settings_calendars_exist_from_the_first_scrape():
    market = MarketSettings(
        symbols=["BTC/USDT", "GOOG/USD", "X/CNY"],
        calendars={"GOOG/USD": "nyse", "X/CNY": "xshg"},
    )
    names = configured_calendars(market)
    assert names == ["XNYS", "XSHG", "continuous"]
    registry = CollectorRegistry()
    CalendarMetrics(registry, names)
    for name in names:
        assert math.isnan(sample(registry, LAST, name) or 0.0)
        assert sample(registry, FALLBACK, name) == 0.0


def test_an_unknown_calendar_is_left_to_the_market_data_step():
    market = MarketSettings(symbols=["X/CNY"], calendar="XSHANGHAI")
    assert configured_calendars(market) == []


def test_the_metrics_follow_the_clock_across_a_calendar_s_end():
    name, bound = first_to_end()
    clock = SimulatedClock(bound - timedelta(days=3))
    names = {"X/CNY": name, "GOOG/USD": "XNYS", "BTC/USDT": "continuous"}
    calendars = SymbolCalendars.named(names, clock.now(), Timeframe("1h"), 64)
    registry = CollectorRegistry()
    metrics = CalendarMetrics(registry, [name])
    metrics.watch(calendars, clock)

    last_known = calendars["X/CNY"].known_until_ms
    assert last_known is not None
    assert sample(registry, LAST, name) == last_known / 1000
    assert bound <= datetime.fromtimestamp(last_known / 1000, UTC) < bound + timedelta(days=1)
    assert sample(registry, FALLBACK, name) == 0.0
    # A calendar with no end of its own: the span it is built to, well past the alert's 30 days.
    ahead = sample(registry, LAST, "XNYS")
    assert ahead is not None
    assert ahead >= (clock.now() + REBUILD_BEFORE).timestamp()
    assert sample(registry, FALLBACK, "XNYS") == 0.0
    assert sample(registry, LAST, "continuous") == math.inf

    clock.advance_to(datetime.fromtimestamp(last_known / 1000, UTC) + timedelta(minutes=1))
    assert sample(registry, FALLBACK, name) == 1.0
    assert sample(registry, FALLBACK, "XNYS") == 0.0
    # Rebuilt a year and more later, the last known session stays where the library ends.
    clock.advance_to(clock.now() + timedelta(days=500))
    calendars.cover(clock.now())
    assert sample(registry, LAST, name) == last_known / 1000
    assert sample(registry, FALLBACK, name) == 1.0
    assert (sample(registry, LAST, "XNYS") or 0) >= (clock.now() + REBUILD_BEFORE).timestamp()


def test_fx_exports_the_end_of_its_span():
    calendar = "fx"
    clock = SimulatedClock(datetime(2026, 11, 27, tzinfo=UTC))
    calendars = SymbolCalendars.named({"EUR/USD": calendar}, clock.now(), Timeframe("1h"), 64)
    registry = CollectorRegistry()
    CalendarMetrics(registry, []).watch(calendars, clock)
    span = calendars["EUR/USD"].span_ms
    assert span is not None
    assert sample(registry, LAST, calendar) == span[1] / 1000
    assert sample(registry, FALLBACK, calendar) == 0.0
