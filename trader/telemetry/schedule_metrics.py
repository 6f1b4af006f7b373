"""What the alert rules need to judge the daemon in its own time and its markets' sessions:
its clock and how fast it runs, its timeframe, when the next tick is due and how late ticks
start, whether each symbol's market is in session, how old a quote may be, whether a replay
has finished, how many ticks in a row went wrong, and which venue it trades on.

The clock, the sessions and the quote age in force are read at each scrape (like the quote
ages), so they are right whenever Prometheus asks, not when a tick last ran. Each reads NaN
until what it needs exists (start-up builds the clock and the calendars with the venue).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from trader.clock import Clock, ScaledClock, SimulatedClock
from trader.config.schema import Settings
from trader.domain import Timeframe, to_epoch_ms
from trader.engine.report import TickReport
from trader.market.calendars.calendar import CalendarRangeError, TradingCalendar
from trader.telemetry.labels import LATENESS, tick_outcome

LATE_AFTER_S = 1.0  # a tick that starts later than this after its time counts as late


def clock_speed(clock: Clock) -> float:
    """Venue seconds per wall second: a sandbox's accelerated clock, a replay's --speed (0:
    as fast as it can go), 1 for the wall clock (shifted or not)."""
    if isinstance(clock, ScaledClock):
        return clock.speed
    if isinstance(clock, SimulatedClock):
        return 0.0 if clock.speed is None else clock.speed
    return 1.0


class ScheduleMetrics:
    def __init__(self, registry: CollectorRegistry, symbols: Sequence[str]) -> None:
        r = registry
        self.symbols = list(symbols)
        self.clock: Clock | None = None
        self.calendars: Mapping[str, TradingCalendar] = {}
        self._settings: Callable[[], Settings] | None = None
        self._skips: dict[str, int] = dict.fromkeys(self.symbols, 0)
        self._not_ok = 0
        self.clock_now = Gauge(
            "trader_clock_timestamp_seconds", "The daemon's clock now (the venue's: a "
            "sandbox's accelerated one, a replay's simulated one); NaN until it exists",
            registry=r,
        )  # fmt: skip
        self.clock_now.set_function(self._now)
        self.speed = Gauge(
            "trader_clock_speed", "Venue seconds per wall second (1 live; a replay's --speed, "
            "0 as fast as it goes); NaN until the clock exists", registry=r,
        )  # fmt: skip
        self.speed.set_function(lambda: math.nan if self.clock is None else clock_speed(self.clock))
        self.replay_finished = Gauge(
            "trader_replay_finished", "1 once a replay has run all its recorded ticks",
            registry=r,
        )  # fmt: skip
        self.timeframe = Gauge(
            "trader_timeframe_seconds", "The bar length (market.timeframe) in seconds; NaN "
            "until the settings are known", registry=r,
        )  # fmt: skip
        self.timeframe.set_function(self._timeframe_s)
        self.quote_max_age = Gauge(
            "trader_quote_max_age_seconds", "market.max_quote_age_s in force: an older quote "
            "is stale", registry=r,
        )  # fmt: skip
        self.quote_max_age.set_function(self._quote_max_age_s)
        self.ticks_late = Counter(
            "trader_ticks_late_total", "Ticks that started more than a second after their time",
            registry=r,
        )  # fmt: skip
        self.tick_lateness = Histogram(
            "trader_tick_lateness_seconds", "How long after its scheduled time a tick started "
            "(or was given up)", registry=r, buckets=LATENESS,
        )  # fmt: skip
        self.next_due = Gauge(
            "trader_next_tick_due_timestamp_seconds", "Scheduled time (daemon's clock) of the "
            "tick not finished yet: the one awaited or running (0: none)", registry=r,
        )  # fmt: skip
        self.in_session = Gauge(
            "trader_market_in_session", "1 while the symbol's market trades (its calendar, "
            "at the daemon's clock); NaN until the clock exists", ["symbol"], registry=r,
        )  # fmt: skip
        self.not_ok = Gauge(
            "trader_ticks_not_ok_in_a_row", "Ticks since the last ok one (degraded, failed "
            "or missed)", registry=r,
        )  # fmt: skip
        self.skips = Gauge(
            "trader_symbol_skips_in_a_row", "Ticks in a row the symbol skipped (any reason)",
            ["symbol"], registry=r,
        )  # fmt: skip
        self.exchange = Info(
            "trader_exchange", "The venue the daemon trades on (ccxt or alpaca) and the "
            "exchange (the ccxt id, or alpaca)", registry=r,
        )  # fmt: skip
        self.exchange.info({"venue": "", "exchange": ""})
        for symbol in self.symbols:
            self.in_session.labels(symbol).set_function(partial(self._session, symbol))
            self.skips.labels(symbol).set(0)

    # --- start-up ---------------------------------------------------------------------------

    def use_settings(self, settings: Callable[[], Settings]) -> None:
        """The settings in force, read at each scrape (a reload swaps them); the venue now."""
        self._settings = settings
        exchange = settings().exchange
        self.exchange.info({"venue": exchange.venue, "exchange": exchange.name})

    def use_venue(self, clock: Clock, calendars: Mapping[str, TradingCalendar]) -> None:
        """The venue's clock and each symbol's calendar (a live daemon's rebuilds itself)."""
        self.clock, self.calendars = clock, calendars

    # --- the tick loop and the ticks ----------------------------------------------------------

    def due(self, at: float | None) -> None:
        """The tick the loop awaits or runs now (epoch seconds); None: no more ticks."""
        self.next_due.set(0.0 if at is None else at)

    def tick(self, report: TickReport) -> None:
        self._not_ok = 0 if tick_outcome(report) == "ok" else self._not_ok + 1
        self.not_ok.set(self._not_ok)
        for symbol in report.ready:
            if symbol not in report.skipped:
                self._skips[symbol] = 0
        for symbol in report.skipped:  # data, or a forecast or strategy it could not have
            self._skips[symbol] = self._skips.get(symbol, 0) + 1
        for symbol, n in self._skips.items():
            self.skips.labels(symbol).set(n)

    def lateness(self, seconds: float, *, missed: bool) -> None:
        """How late a tick started, or was given up as too late (missed: not ok either)."""
        self.tick_lateness.observe(max(0.0, seconds))
        if missed:
            self._not_ok += 1
            self.not_ok.set(self._not_ok)
        elif seconds > LATE_AFTER_S:
            self.ticks_late.inc()

    # --- read at each scrape ------------------------------------------------------------------

    def _now(self) -> float:
        return math.nan if self.clock is None else self.clock.now().timestamp()

    def _timeframe_s(self) -> float:
        if self._settings is None:
            return math.nan
        return float(Timeframe(self._settings().market.timeframe).seconds)

    def _quote_max_age_s(self) -> float:
        return math.nan if self._settings is None else self._settings().market.max_quote_age_s

    def _session(self, symbol: str) -> float:
        calendar = self.calendars.get(symbol)
        if calendar is None or self.clock is None:
            return math.nan
        try:
            return float(calendar.in_session(to_epoch_ms(self.clock.now())))
        except CalendarRangeError:  # past the span it was built for: unknown, not closed
            return math.nan
