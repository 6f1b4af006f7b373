"""The venue as the live broker talks to it: the ccxt client, and what a failed call means.

- Every call goes through `ask`: an answer ccxt chokes on is a bad answer, not our bug.
- A failed call is `note`d (logged, classified by `trader.broker.venue_errors`). Credentials
  the venue refuses halt the broker for good: `BrokerHalt` now and on every later check. A
  venue that is down or asked us to back off (429/418) pauses new orders, as long as it asked
  (Retry-After) or else the retry policy's longest wait.
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
from trader.market.retry import RetryPolicy

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
    ) -> None:
        self.exchange = exchange
        self.name = str(exchange.id)
        self.instruments = instruments  # the markets this broker trades
        self.retry = retry
        self.monotonic = monotonic
        self._sleep = sleep
        self._paused_until = 0.0
        self._pause_reason = ""
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
        if found.meaning is Meaning.HALT:
            self._halted = (
                f"{self.name} refused our credentials ({found.detail}): check "
                f"{credentials_hint(self.exchange)}"
            )
            self.log.error("credentials refused", what=what, detail=found.detail)
            raise BrokerHalt(self._halted) from error
        if found.pause:
            # As long as the venue asked (Retry-After), else a while: nothing new is sent.
            asked = retry_after(self.exchange)
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
        try:
            raw = await self.ask(
                self.exchange.fetch_order(
                    None, order.symbol, {"origClientOrderId": order.client_order_id}
                )
            )
        except ccxt.OrderNotFound:
            return None
        return VenueOrder.read(raw)
