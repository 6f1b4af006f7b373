"""The venue as the live broker talks to it: the ccxt client, and what a failed call means.

- Every call goes through `ask`: an answer ccxt chokes on is a bad answer, not our bug.
- A failed call is `note`d (logged, classified by `trader.broker.venue_errors`). Credentials
  the venue refuses halt the broker for good: `BrokerHalt` now and on every later check. A
  venue that is down or asked us to back off (429/418) pauses new orders, as long as it asked
  (Retry-After) or else the retry policy's longest wait; a pause because it was down ends when
  a whole reconciliation has read the venue (`answered`).
- A request refused before processing waits out a `back_off` before it is tried again.
- `lookup` asks for an order by its client id: the one way to learn what became of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import ccxt.async_support as ccxt

from trader.broker.ccxt_orders import VenueOrder
from trader.broker.venue_errors import (
    BrokerHalt,
    Classified,
    Meaning,
    classify,
    credentials_hint,
)
from trader.domain import Instrument, Order
from trader.logging import get_logger
from trader.market.ccxt_feed import _PARSE_ERRORS, retry_after
from trader.market.retry import RetryPolicy, failure_kind

T = TypeVar("T")


class VenueClient:
    def __init__(
        self,
        exchange: ccxt.Exchange,
        instruments: Mapping[str, Instrument],
        retry: RetryPolicy,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
        on_error: Callable[[str], None] = lambda kind: None,
    ) -> None:
        self.exchange = exchange
        # Each failed call, by the feed's kinds: the daemon counts them with the feed's.
        self.on_error = on_error
        self.name = str(exchange.id)
        self.instruments = instruments  # the markets this broker trades
        self.retry = retry
        self.monotonic = monotonic
        self._sleep = sleep
        self._paused_until = 0.0
        self._pause_reason = ""
        self._down_pause = False  # paused only because the venue was down, not at its asking
        self._paused_at = 0.0  # when the last pause began (monotonic)
        self._halted: str | None = None
        self.log = get_logger("trader.broker", broker=self.name)

    # --- what failures mean -----------------------------------------------------------------

    def check_halted(self) -> None:
        if self._halted is not None:
            raise BrokerHalt(self._halted)

    def paused(self) -> str | None:
        """Why new orders must wait now (the venue asked us to), or None."""
        if self.monotonic() < self._paused_until:
            return self._pause_reason
        return None

    def note(self, what: str, order: Order, error: BaseException) -> Classified:
        """A failed call about `order`, logged and classified; credentials refused halt."""
        found = classify(error)
        self.on_error(failure_kind(error))
        if found.meaning is Meaning.HALT:
            check = credentials_hint(self.exchange)
            self._halted = f"{self.name} refused our credentials ({found.detail}): check {check}"
            self.log.error("credentials refused", what=what, detail=found.detail, check=check)
            raise BrokerHalt(self._halted) from error
        if found.pause:
            # As long as the venue asked (Retry-After), else a while: nothing new is sent.
            asked = retry_after(self.exchange)
            down = asked is None and found.meaning is Meaning.UNKNOWN  # 5xx, no wait named
            self._down_pause = down and (self._down_pause or self.paused() is None)
            self._paused_at = self.monotonic()
            wait = asked if asked is not None else self.retry.max_delay_s
            self._paused_until = max(self._paused_until, self.monotonic() + wait)
            self._pause_reason = f"{found.label} ({found.detail})"
        self.log.warning(
            "exchange call failed", what=what, order=order.client_order_id,
            kind=found.label, meaning=str(found.meaning), detail=found.detail,
        )  # fmt: skip
        return found

    async def back_off(self, attempt: int) -> bool:
        """Wait before retrying a refused request; False when the venue asked for longer
        than we may wait."""
        asked = retry_after(self.exchange)
        wait = asked if asked is not None else self.retry.backoff(attempt, lambda: 1.0)
        if wait > self.retry.max_delay_s:
            return False
        await self._sleep(wait)
        return True

    def answered(self, since: float) -> None:
        """The venue answered every call of a whole reconciliation that began at `since`
        (monotonic): a pause from before it, only because the venue was down, ends (the
        daemon reconciles the moment the exchange is back, then trades); one the venue asked
        for stands."""
        if self._down_pause and self._paused_at < since:
            self._paused_until, self._down_pause = 0.0, False

    # --- asking -----------------------------------------------------------------------------

    async def ask(self, call: Awaitable[T]) -> T:
        """An exchange call; an answer ccxt chokes on is a bad answer, not our bug."""
        try:
            return await call
        except _PARSE_ERRORS as error:
            raise ccxt.BadResponse(f"unreadable answer ({error!r})") from error

    def market_id(self, symbol: str) -> str:
        return str(self.exchange.market(symbol)["id"])

    async def lookup(self, order: Order) -> VenueOrder | None:
        """The venue's view of `order`, by client id; None when it does not know it."""
        # ccxt's aster reads the client id only as `clientOrderId` (aster.py `fetch_order`);
        # binance and our Alpaca adapter as `origClientOrderId`.
        key = "clientOrderId" if self.exchange.id == "aster" else "origClientOrderId"
        try:
            raw = await self.ask(
                self.exchange.fetch_order(None, order.symbol, {key: order.client_order_id})
            )
        except ccxt.OrderNotFound:
            return None
        return VenueOrder.read(raw)
