"""`trader_quote_age_seconds`: how old each symbol's newest quote is when Prometheus asks.

The time of the newest quote seen is kept per symbol (a real, modelled or synthetic one, and
one too old to trade on: that is exactly the case to alert on), and its age is measured at
each scrape on the daemon's clock (the venue's: simulated in a replay). So the age keeps
growing while the exchange is away, instead of keeping the last value a poll measured. NaN
until a symbol's first quote, or while there is no clock yet (start-up).
"""

from __future__ import annotations

import math
from datetime import datetime

from prometheus_client import Gauge

from trader.clock import Clock


class QuoteAges:
    def __init__(self, gauge: Gauge, clock: Clock | None = None) -> None:
        self._gauge = gauge
        self.clock = clock
        self._newest: dict[str, datetime] = {}
        self._tracked: set[str] = set()

    def track(self, symbol: str) -> None:
        """The symbol's series, measured at every scrape from now on."""
        if symbol not in self._tracked:
            self._tracked.add(symbol)
            self._gauge.labels(symbol).set_function(lambda: self.age(symbol))

    def saw(self, symbol: str, at: datetime) -> None:
        """A quote stamped `at` arrived (an older one than the newest changes nothing)."""
        self.track(symbol)
        newest = self._newest.get(symbol)
        if newest is None or at > newest:
            self._newest[symbol] = at

    def newest(self, symbol: str) -> datetime | None:
        return self._newest.get(symbol)

    def age(self, symbol: str) -> float:
        """Seconds from the newest quote to now (never negative: a venue clock a little ahead
        of ours is not a quote from the future); NaN when there is none or no clock yet."""
        newest, clock = self._newest.get(symbol), self.clock
        if newest is None or clock is None:
            return math.nan
        return max(0.0, (clock.now() - newest).total_seconds())
