"""Whether the exchange answers. An unreachable exchange never stops the daemon: it is said
plainly (the log when it changes, /readyz's "exchange" check, the metric), start-up goes on,
the market data is started again until it succeeds, and trading resumes once it is back: the
moment it answers again, `when_back`'s callback runs (a reconciliation, `jobs.py`).

Every failed call is counted by kind; keys the venue refuses (`authentication`) are also said
in the log with the settings to check for that venue, never the keys themselves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from structlog.typing import FilteringBoundLogger as Logger

from trader.exit_codes import EX_CONFIG
from trader.market.feed import ExchangeCallFailed, SymbolsRefused, UnknownSymbols
from trader.service.parts import Parts, StartupFailed

MARKET_RETRY_MAX_S = 60.0
NOT_CONTACTED = "not contacted yet"
CREDENTIALS_LOG_EVERY_S = 60.0  # every refused call is counted; the log says it this often


class ExchangeConnection:
    def __init__(self, parts: Parts, log: Logger) -> None:
        self._parts = parts
        self._log = log
        self._state: tuple[bool, str] = (False, NOT_CONTACTED)
        self._market_started = False
        self._on_back: Callable[[], None] | None = None
        self._back_unheard = False  # back before anyone asked to hear it
        self._credentials_said = -CREDENTIALS_LOG_EVERY_S  # time.monotonic() of the last

    def market_started(self) -> bool:
        """The symbols are checked and the windows loaded (by start-up, a retry or a tick)."""
        return self._market_started

    def check(self) -> tuple[bool, str]:
        """The readiness check: reachable, or why not."""
        return self._state

    def when_back(self, callback: Callable[[], None]) -> None:
        """Have `callback` run each time the exchange answers again after it was unreachable
        (at once for a return that came before this was asked). The first contact is not a
        return: start-up has just reconciled."""
        self._on_back = callback
        if self._back_unheard:
            self._back_unheard = False
            callback()

    def set(self, up: bool, detail: str) -> None:
        was = self._state
        back = up and not was[0] and was[1] != NOT_CONTACTED
        if back:
            self._log.info("exchange reachable again", exchange=self.feed_name())
        elif not up and was[0]:
            self._log.error("exchange unreachable", exchange=self.feed_name(), why=detail)
        self._state = (up, detail)
        if self._parts.metrics is not None:
            self._parts.metrics.exchange_reachable.set(up)
        if back:
            if self._on_back is None:
                self._back_unheard = True
            else:
                self._on_back()

    def on_error(self, kind: str) -> None:
        """A failed exchange call, by kind (the feed and the live broker report each)."""
        if self._parts.metrics is not None:
            self._parts.metrics.exchange_error(kind)
        if kind == "authentication":
            self._credentials_refused()

    def _credentials_refused(self) -> None:
        now = time.monotonic()
        if now - self._credentials_said < CREDENTIALS_LOG_EVERY_S:
            return
        self._credentials_said = now
        venue = self._parts.venue
        exchange = getattr(venue.feed, "exchange", None) if venue is not None else None
        if exchange is None:
            return  # a replay never calls an exchange
        from trader.broker.venue_errors import credentials_hint  # noqa: PLC0415 - loads ccxt

        self._log.error(
            "exchange refused our credentials: a person must fix them",
            exchange=self.feed_name(), check=credentials_hint(exchange),
        )  # fmt: skip

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
