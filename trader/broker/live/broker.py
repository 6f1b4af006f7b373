"""The live broker: orders on a real venue through ccxt (async), behind the paper broker's
protocol. It is a composition of parts, each in its own module:

- `venue.VenueClient`: the ccxt client; what a failed call means (credentials refused
  halt, a venue that is down or asked us to back off pauses new orders, refusals back off).
- `book.OpenOrders`: the orders open at the venue, or perhaps there (lost answers,
  orders recorded before a restart), and how long a lost one may still arrive.
- `submit.Placement`: sending an order with our client id, on the market's grid, once.
- `unknown.OutcomeResolver`: an order whose answer was lost is looked up by its client
  id before anything else; not found after its recvWindow, it never arrived.
- `fills.FillBooking`: an order brought up to the venue's state, with the fills the
  ledger has not booked, read from the venue's trade history.
- `cancel.Cancelling`: cancel by client id, the venue's view deciding when it fails.
  Amend is cancel-and-replace (`trader.broker.amend`).
- `poll.Polling`: each tick, what rests at the venue: fills, ends, expiries; and one order
  at once when the venue's stream says it changed (`settle_now`, Alpaca's trade updates).
- `reconcile.Reconciler`: the ledger's open orders, recent trades, foreign orders and
  balances against the venue's (see `trader.domain.reconciliation`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import ccxt.async_support as ccxt

from trader.broker.amend import cancel_and_replace
from trader.broker.live.book import OpenOrders, lost_order_window_ms
from trader.broker.live.cancel import Cancelling
from trader.broker.live.fills import FillBooking
from trader.broker.live.poll import Polling
from trader.broker.live.reconcile import Reconciler
from trader.broker.live.submit import Placement
from trader.broker.live.unknown import OutcomeResolver
from trader.broker.live.venue import VenueClient
from trader.broker.safety import InstanceLocks
from trader.config.trading_settings import BrokerSettings
from trader.domain import Bar, Instrument, Order, Quote
from trader.domain.execution import Execution
from trader.domain.reconciliation import LedgerBook, ReconcileReport
from trader.market.retry import RetryPolicy


class LiveBroker:
    external = True

    def __init__(
        self,
        exchange: ccxt.Exchange,
        settings: BrokerSettings,
        instruments: Mapping[str, Instrument],
        *,
        retry: RetryPolicy | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
        locks: InstanceLocks | None = None,
        on_error: Callable[[str], None] = lambda kind: None,
    ) -> None:
        # ccxt signs every private request with this window; the venue refuses it after.
        exchange.options["recvWindow"] = settings.recv_window_ms
        client = VenueClient(
            exchange, instruments, retry or RetryPolicy(), monotonic=monotonic, sleep=sleep,
            on_error=on_error,
        )  # fmt: skip
        # A venue without a recvWindow (Alpaca) leaves a lost order to reconciliation.
        orders = OpenOrders(monotonic, lost_order_window_ms(exchange, settings.recv_window_ms))
        booking = FillBooking(client, orders)
        resolver = OutcomeResolver(client, orders, booking)
        cancelling = Cancelling(client, orders, booking, resolver)
        self.name = client.name
        self.settings = settings
        self._client = client
        self._orders = orders
        self._placement = Placement(client, orders, booking, resolver)
        self._cancelling = cancelling
        self._polling = Polling(client, orders, booking, resolver, cancelling)
        self._reconciler = Reconciler(client, booking, resolver, settings)
        self._locks = locks  # held while this broker trades

    def restore(self, orders: Sequence[Order], fill_counts: Mapping[str, int]) -> None:
        self._orders.restore(orders)

    def open_orders(self) -> list[Order]:
        return self._orders.all()

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        return await self._placement.submit(order, quote, at)

    async def cancel(self, order: Order, at: datetime) -> Execution | None:
        return await self._cancelling.cancel(order, at)

    async def replace(
        self, order: Order, replacement: Order, quote: Quote, at: datetime
    ) -> list[Execution]:
        return await cancel_and_replace(self, order, replacement, quote, at)

    async def on_market(
        self, bars: Sequence[Bar], quotes: Mapping[str, Quote], at: datetime
    ) -> list[Execution]:
        """Poll what rests at the venue: fills, ends, and expiries (cancelled at the venue)."""
        return await self._polling.poll(at)

    async def settle_now(self, client_order_id: str, at: datetime) -> Execution | None:
        """An order the venue's stream says changed, settled now as a poll would settle it:
        whichever of the two sees a fill first books it, the other finds nothing new."""
        return await self._polling.settle_now(client_order_id, at)

    async def reconcile(
        self, book: LedgerBook, at: datetime, *, dry_run: bool = False
    ) -> ReconcileReport:
        return await self._reconciler.reconcile(book, at, dry_run=dry_run)

    def close(self) -> None:
        if self._locks is not None:
            self._locks.release()

    # The client and the markets it trades, shared by every part (and replaceable).

    @property
    def exchange(self) -> ccxt.Exchange:
        return self._client.exchange

    @exchange.setter
    def exchange(self, exchange: ccxt.Exchange) -> None:
        self._client.exchange = exchange

    @property
    def instruments(self) -> Mapping[str, Instrument]:
        return self._client.instruments

    @instruments.setter
    def instruments(self, instruments: Mapping[str, Instrument]) -> None:
        self._client.instruments = instruments

    @property
    def retry(self) -> RetryPolicy:
        return self._client.retry
