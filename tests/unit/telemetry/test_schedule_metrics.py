"""The series the alert rules judge the daemon by in its own time and its markets' sessions,
read from a real registry: the clock and its speed, the timeframe, the quote age in force,
whether each market is in session (real calendars: Shanghai's lunch break and weekend read
from a recorded A-share file, the FX week), ticks and skips in a row, and the venue."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from tests.recorded import XSHG_600977_5MIN
from trader.clock import ScaledClock, SimulatedClock, WallClock
from trader.config.market_settings import ExchangeSettings, MarketSettings
from trader.config.schema import Settings
from trader.daemon.reload import plan_reload
from trader.domain import from_epoch_ms, to_epoch_ms
from trader.engine.report import TickReport
from trader.market.calendars.calendar import CalendarRangeError
from trader.market.calendars.registry import build_calendar
from trader.market.live_source import venue_clock
from trader.market.replay import read_recording
from trader.market.replay_calendars import replay_calendars
from trader.telemetry.metrics import Metrics

T0 = datetime(2025, 3, 3, 10, tzinfo=UTC)  # a Monday
A_SHARE = "600977/CNY"


class SetClock:
    """A clock that shows whatever time it is set to, back or forth."""

    at = T0

    def now(self) -> datetime:
        return self.at

    async def sleep_until(self, when: datetime) -> None:
        self.at = max(self.at, when)


def metrics(symbols: list[str] | None = None) -> Metrics:
    return Metrics(CollectorRegistry(), symbols or ["SOL/USDT"])


def get(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def nan(value: float | None) -> bool:
    return value is not None and math.isnan(value)


def test_every_new_series_exists_from_the_first_scrape_nan_where_unknown_yet():
    m = metrics(["SOL/USDT", "BTC/USDT"])
    for name in ("trader_clock_timestamp_seconds", "trader_clock_speed",
                 "trader_timeframe_seconds", "trader_quote_max_age_seconds"):  # fmt: skip
        assert nan(get(m, name)), name
    assert nan(get(m, "trader_market_in_session", symbol="BTC/USDT"))
    assert get(m, "trader_replay_finished") == 0
    assert get(m, "trader_next_tick_due_timestamp_seconds") == 0
    assert get(m, "trader_ticks_not_ok_in_a_row") == 0
    assert get(m, "trader_symbol_skips_in_a_row", symbol="BTC/USDT") == 0
    assert get(m, "trader_exchange_info", venue="", exchange="") == 1


def test_the_clock_is_read_at_each_scrape_with_its_speed():
    m = metrics()
    clock = SimulatedClock(T0)  # a replay as fast as it goes
    m.use_clock(clock)
    assert (get(m, "trader_clock_timestamp_seconds"), get(m, "trader_clock_speed")) == (
        T0.timestamp(),
        0.0,
    )
    clock.advance_to(T0 + timedelta(hours=5))
    assert get(m, "trader_clock_timestamp_seconds") == (T0 + timedelta(hours=5)).timestamp()
    m.use_clock(SimulatedClock(T0, speed=3600))  # trader run --replay --speed 3600
    assert get(m, "trader_clock_speed") == 3600
    m.use_clock(WallClock())
    assert get(m, "trader_clock_speed") == 1
    assert abs(get(m, "trader_clock_timestamp_seconds") - datetime.now(UTC).timestamp()) < 60  # type: ignore[operator]


def test_the_clock_speed_is_the_sandboxs_and_a_shifted_clock_runs_at_one():
    # The three settings `trader sandbox --venue alpaca` prints (AlpacaSandbox.daemon_settings).
    origin = datetime(2024, 6, 18, 1, 30, tzinfo=UTC)
    wall_origin = datetime.now(UTC)
    exchange = ExchangeSettings(
        venue="alpaca", api_base_url="http://127.0.0.1:8123",
        clock={"speed": 60, "wall_origin": wall_origin, "origin": origin},
    )  # fmt: skip
    clock = venue_clock(exchange)
    assert isinstance(clock, ScaledClock)
    m = metrics()
    m.use_clock(clock)
    assert get(m, "trader_clock_speed") == 60
    # Judged in the venue's time: the sandbox's 2024 morning, not the wall clock's now.
    assert get(m, "trader_clock_timestamp_seconds") < wall_origin.timestamp() - 86400  # type: ignore[operator]
    shifted = ExchangeSettings(
        api_base_url="http://127.0.0.1:8123", clock={"wall_origin": wall_origin, "origin": origin}
    )
    m.use_clock(venue_clock(shifted))
    assert get(m, "trader_clock_speed") == 1


@pytest.mark.parametrize(("timeframe", "seconds"), [("1m", 60), ("5m", 300), ("1h", 3600),
                                                    ("1d", 86400)])  # fmt: skip
def test_the_timeframe_in_seconds(timeframe, seconds):
    m = metrics()
    settings = Settings(market={"timeframe": timeframe})
    m.schedule.use_settings(lambda: settings)
    assert get(m, "trader_timeframe_seconds") == seconds


def test_the_quote_age_in_force_follows_the_settings_in_force_and_the_venue_is_named():
    m = metrics()
    running = Settings(market={"max_quote_age_s": 30}, exchange={"id": "kraken"})
    now = {"settings": running}
    m.schedule.use_settings(lambda: now["settings"])
    assert get(m, "trader_quote_max_age_seconds") == 30
    assert get(m, "trader_exchange_info", venue="ccxt", exchange="kraken") == 1
    # A SIGHUP reload keeps the running market section (only a restart applies it) ...
    edited = Settings(market={"max_quote_age_s": 90}, exchange={"id": "kraken"})
    plan = plan_reload(running, edited)
    assert plan.needs_restart == ["market.max_quote_age_s"]
    now["settings"] = plan.settings  # what apply_reload gives the engine
    assert get(m, "trader_quote_max_age_seconds") == 30
    # ... and the gauge reads whatever settings are in force at the scrape.
    now["settings"] = edited
    assert get(m, "trader_quote_max_age_seconds") == 90
    alpaca = metrics()
    alpaca.schedule.use_settings(lambda: Settings(exchange={"venue": "alpaca"}))
    assert get(alpaca, "trader_exchange_info", venue="alpaca", exchange="alpaca") == 1


def test_in_session_follows_shanghais_lunch_break_night_and_weekend_from_recorded_bars():
    recording = read_recording(XSHG_600977_5MIN, A_SHARE)  # Beijing times, stamped at bar end
    replay = replay_calendars(MarketSettings(), {A_SHARE: recording})
    assert replay.calendars[A_SHARE].name == "XSHG"
    calendar = replay.calendars[A_SHARE]
    starts = replay.recordings[A_SHARE].starts
    # Every recorded bar, start and middle, falls in a session (a month of trading days).
    assert all(calendar.in_session(t) and calendar.in_session(t + 150_000) for t in starts)
    with pytest.raises(CalendarRangeError):  # as the calendar's other questions do
        calendar.in_session(to_epoch_ms(datetime(2031, 1, 6, 2, tzinfo=UTC)))
    m = metrics([A_SHARE])
    clock = SetClock()
    m.use_clock(clock, replay.calendars)

    def in_session(at: datetime) -> float | None:
        clock.at = at
        return get(m, "trader_market_in_session", symbol=A_SHARE)

    assert in_session(from_epoch_ms(starts[-1])) == 1
    # Wednesday 2024-06-19 (Beijing = UTC+8): the lunch break 11:30-13:00 and the night.
    day = datetime(2024, 6, 19, tzinfo=UTC)
    assert in_session(day + timedelta(hours=3, minutes=29)) == 1  # 11:29 Beijing
    assert in_session(day + timedelta(hours=3, minutes=30)) == 0  # 11:30: lunch
    assert in_session(day + timedelta(hours=4, minutes=59)) == 0
    assert in_session(day + timedelta(hours=5)) == 1  # 13:00
    assert in_session(day + timedelta(hours=7)) == 0  # 15:00: closed for the night
    saturday = datetime(2024, 6, 22, 2, tzinfo=UTC)  # 10:00 Beijing
    assert in_session(saturday) == 0
    assert to_epoch_ms(saturday) not in set(starts)
    assert in_session(datetime(2024, 6, 24, 2, tzinfo=UTC)) == 1  # Monday 10:00 Beijing
    # Past the span the calendar was built for: unknown, not closed.
    assert nan(in_session(datetime(2031, 1, 6, 2, tzinfo=UTC)))


def test_in_session_over_the_fx_weekend_and_always_on_a_continuous_market():
    year = datetime(2025, 1, 1, tzinfo=UTC)
    fx = build_calendar("fx", to_epoch_ms(year), to_epoch_ms(year + timedelta(days=365)))
    crypto = build_calendar("continuous", 0, 1)
    m = metrics(["EUR/USD", "SOL/USDT"])
    clock = SimulatedClock(datetime(2025, 3, 7, 20, 59, tzinfo=UTC))  # Friday 15:59 New York
    m.use_clock(clock, {"EUR/USD": fx, "SOL/USDT": crypto})
    expected = [
        (datetime(2025, 3, 7, 20, 59, tzinfo=UTC), 1),
        (datetime(2025, 3, 7, 22, 0, tzinfo=UTC), 0),  # Friday 17:00 New York (EST): closed
        (datetime(2025, 3, 9, 12, 0, tzinfo=UTC), 0),  # Sunday noon
        (datetime(2025, 3, 9, 21, 0, tzinfo=UTC), 1),  # Sunday 17:00 New York (EDT now)
    ]
    for at, fx_open in expected:
        clock.advance_to(at)
        assert get(m, "trader_market_in_session", symbol="EUR/USD") == fx_open, at
        assert get(m, "trader_market_in_session", symbol="SOL/USDT") == 1


def test_ticks_and_skips_in_a_row_count_until_an_ok_tick_or_a_traded_symbol():
    m = metrics(["SOL/USDT", "BTC/USDT"])

    def in_a_row() -> tuple[float | None, float | None, float | None]:
        return (
            get(m, "trader_ticks_not_ok_in_a_row"),
            get(m, "trader_symbol_skips_in_a_row", symbol="SOL/USDT"),
            get(m, "trader_symbol_skips_in_a_row", symbol="BTC/USDT"),
        )

    m.observe_tick(TickReport(T0, ready=["BTC/USDT"], skipped={"SOL/USDT": "stale_quote"}))
    assert in_a_row() == (1, 1, 0)
    m.observe_lateness(4000.0, missed=True)  # given up: not ok either, no symbol's doing
    assert in_a_row() == (2, 1, 0)
    failed = TickReport(T0, ready=["SOL/USDT", "BTC/USDT"], failed_stages=["forecast:toto"])
    failed.skipped = {"SOL/USDT": "no_forecast", "BTC/USDT": "no_forecast"}
    m.observe_tick(failed)  # ready, then no forecast: still a skip
    assert in_a_row() == (3, 2, 1)
    m.observe_lateness(2.0)  # late but run: counted late, nothing else changes
    assert (get(m, "trader_ticks_late_total"), get(m, "trader_tick_lateness_seconds_count")) == (
        1,
        2,
    )
    assert get(m, "trader_ticks_total", outcome="missed") == 1
    m.observe_tick(TickReport(T0, ready=["SOL/USDT"], skipped={"BTC/USDT": "gap"}))
    assert in_a_row() == (4, 0, 2)
    m.observe_tick(TickReport(T0, ready=["SOL/USDT", "BTC/USDT"]))
    assert in_a_row() == (0, 0, 0)
