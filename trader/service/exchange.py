"""Whether the exchange answers. An unreachable exchange never stops the daemon: it is said
plainly (the log when it changes, /readyz's "exchange" check, the metric), start-up goes on,
the market data is started again until it succeeds, and trading resumes once it is back."""

from __future__ import annotations

import asyncio

from structlog.typing import FilteringBoundLogger as Logger

from trader.exit_codes import EX_CONFIG
from trader.market.feed import ExchangeCallFailed, SymbolsRefused, UnknownSymbols
from trader.service.parts import Parts, StartupFailed

MARKET_RETRY_MAX_S = 60.0
NOT_CONTACTED = "not contacted yet"


class ExchangeConnection:
    def __init__(self, parts: Parts, log: Logger) -> None:
        self._parts = parts
        self._log = log
        self._state: tuple[bool, str] = (False, NOT_CONTACTED)
        self._market_started = False

    def market_started(self) -> bool:
        """The symbols are checked and the windows loaded (by start-up, a retry or a tick)."""
        return self._market_started

    def check(self) -> tuple[bool, str]:
        """The readiness check: reachable, or why not."""
        return self._state

    def set(self, up: bool, detail: str) -> None:
        was = self._state
        if up and not was[0] and was[1] != NOT_CONTACTED:
            self._log.info("exchange reachable again", exchange=self.feed_name())
        elif not up and was[0]:
            self._log.error("exchange unreachable", exchange=self.feed_name(), why=detail)
        self._state = (up, detail)
        if self._parts.metrics is not None:
            self._parts.metrics.exchange_reachable.set(up)

    def on_error(self, kind: str) -> None:
        """A failed exchange call, by kind (the feed reports each)."""
        if self._parts.metrics is not None:
            self._parts.metrics.exchange_error(kind)

    async def start_market(self) -> bool:
        """Check the symbols with the venue and reload the bar windows; False while the
        exchange cannot be reached (said plainly, once per attempt)."""
        engine, venue = self._parts.engine, self._parts.venue
        assert engine is not None
        assert venue is not None
        try:
            await engine.market.start(venue.clock.now())
        except ExchangeCallFailed as error:
            self.set(False, f"{engine.market.feed.name} unreachable: {error.kind}")
            if self._parts.phase == "stopping":  # an attempt that was under way at the stop
                self._log.info("exchange still unreachable at the stop", kind=error.kind)
                return False
            self._log.error(
                "exchange unreachable: trading waits for it; retrying",
                exchange=engine.market.feed.name,
                kind=error.kind,
                detail=str(error)[:300],
            )
            return False
        except (UnknownSymbols, SymbolsRefused) as error:
            raise StartupFailed(EX_CONFIG, "market data", str(error)) from error
        self._market_started = True
        self.set(True, "reachable")
        return True

    async def keep_connecting(self) -> None:
        """Start the market data again, less and less often, until it succeeds (or a tick
        started it first)."""
        delay = 5.0
        while not self.market_started():
            await asyncio.sleep(delay)
            if self.market_started() or self._parts.phase == "stopping":
                return  # a tick started it first, or the daemon is stopping
            try:
                if await self.start_market():
                    return
            except StartupFailed as failed:  # a symbol the venue no longer lists
                self._log.error("market data", reason=failed.reason)
            delay = min(delay * 2, MARKET_RETRY_MAX_S)

    def feed_name(self) -> str:
        venue = self._parts.venue
        return venue.feed.name if venue is not None else "?"
