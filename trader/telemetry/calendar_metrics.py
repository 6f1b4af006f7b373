"""How far each trading calendar's sessions are known, and whether the daemon has passed that
(a module of its own: `Metrics` holds the daemon's others).

trader_calendar_last_session_timestamp_seconds{calendar}: the close of the last session
exchange_calendars knows for a calendar that ends (XSHG, XBOM, XSES ...); for one with no end
of its own (fx, or XNYS, rebuilt ahead as time goes on) the end of the span it is built to now,
at least 60 days ahead of a live daemon's clock; +Inf for a continuous market.
trader_calendar_fallback{calendar}: 1 while the daemon's clock is past the calendar's known
sessions and it runs on the exchange's regular weekly sessions without holidays, else 0.
Both are read at each scrape from the calendars as they are now (rebuilt by
`SymbolCalendars.cover`) and the venue's clock: series for the settings' calendars exist from
the first scrape, NaN and 0 until the calendars are built.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Gauge

from trader.clock import Clock
from trader.config.market_settings import MarketSettings
from trader.domain import to_epoch_ms
from trader.market.calendars.known_end import KnownEnd
from trader.market.calendars.per_symbol import SymbolCalendars
from trader.market.calendars.registry import canonical_name
from trader.market.live_source import calendar_names

NAN = float("nan")


def configured_calendars(market: MarketSettings) -> list[str]:
    """The calendars the settings name, as the daemon will know them ("nyse" is XNYS); an
    unknown name is left to the market data step, which refuses it with its fix."""
    names = set()
    for name in calendar_names(market).values():
        try:
            names.add(canonical_name(name))
        except ValueError:
            continue
    return sorted(names)


class CalendarMetrics:
    def __init__(self, registry: CollectorRegistry, calendars: Iterable[str]) -> None:
        self.last_session = Gauge(
            "trader_calendar_last_session_timestamp_seconds",
            "Close of the last session the calendar library knows (a calendar with no end of "
            "its own: the end of the span it is built to now; +Inf: always open)",
            ["calendar"],
            registry=registry,
        )
        self.fallback = Gauge(
            "trader_calendar_fallback",
            "1 while the daemon's clock is past the calendar's known sessions and it runs on "
            "the exchange's regular weekly sessions without holidays",
            ["calendar"],
            registry=registry,
        )
        self._calendars: SymbolCalendars | None = None
        self._clock: Clock | None = None
        self._named: set[str] = set()
        for name in calendars:
            self._series(name)

    def watch(self, calendars: SymbolCalendars, clock: Clock) -> None:
        """Read these calendars (a live daemon's are rebuilt as time goes on) on this clock."""
        self._calendars, self._clock = calendars, clock
        for end in calendars.known_ends():
            self._series(end.calendar)

    def _series(self, name: str) -> None:
        if name in self._named:
            return
        self._named.add(name)
        self.last_session.labels(name).set_function(lambda: self._last_session(name))
        self.fallback.labels(name).set_function(lambda: self._fallback(name))

    def _end(self, name: str) -> KnownEnd | None:
        if self._calendars is None:
            return None
        return next((e for e in self._calendars.known_ends() if e.calendar == name), None)

    def _last_session(self, name: str) -> float:
        end = self._end(name)
        return NAN if end is None else end.last_session_ms / 1000

    def _fallback(self, name: str) -> float:
        end = self._end(name)
        if end is None or self._clock is None:
            return 0.0
        return float(end.fallback(to_epoch_ms(self._clock.now())))
