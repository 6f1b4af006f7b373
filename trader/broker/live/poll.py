"""Watching what rests at the venue, each tick.

Per symbol with open orders: the venue's open orders, once; an order still resting there is
settled when it filled more (or was not yet known by its venue id); one that left the book is
looked up to learn how (filled, cancelled, expired); one whose outcome is unknown is looked up
by its client id. An order whose expiry has passed is then cancelled at the venue (EXPIRED).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import ccxt.async_support as ccxt

from trader.broker.ccxt_orders import VenueMismatch, VenueOrder
from trader.broker.live.book import LOOKING
from trader.broker.live.cancel import Cancelling
from trader.broker.live.parts import OrderParts
from trader.domain import Order, OrderStatus
from trader.domain.execution import Execution


@dataclass(frozen=True)
class Polling(OrderParts):
    cancelling: Cancelling

    async def poll(self, at: datetime) -> list[Execution]:
        """Fills, ends, and expiries (cancelled at the venue) of the orders open here."""
        executions: list[Execution] = []
        symbols = sorted({o.symbol for o in self.orders.all()})
        for symbol in symbols:
            try:
                raw = await self.client.ask(self.client.exchange.fetch_open_orders(symbol))
                resting = {v.client_order_id: v for v in map(VenueOrder.read, raw)}
            except ccxt.BaseError as error:
                self.client.note("poll open orders", next(iter(self.orders.all())), error)
                continue
            except VenueMismatch as error:
                self.client.log.warning("unreadable open orders", symbol=symbol, detail=str(error))
                continue
            for order in [o for o in self.orders.all() if o.symbol == symbol]:
                try:
                    done = await self._one(order, resting.get(order.client_order_id), at)
                except VenueMismatch as error:
                    self.client.log.error(
                        "venue mismatch", order=order.client_order_id, detail=str(error)
                    )
                    continue
                if done is not None:
                    executions.append(done)
                current = self.orders.get(order)
                if (
                    current is not None
                    and current.expires_at is not None
                    and current.expires_at <= at
                ):
                    expired = await self.cancelling.cancel(current, at, OrderStatus.EXPIRED)
                    if expired is not None:
                        executions.append(expired)
        return executions

    async def settle_now(self, client_order_id: str, at: datetime) -> Execution | None:
        """One open order brought up to the venue's state now, by the same path as a poll
        (a stream said it changed); None when it is not open here or nothing changed. A call
        that fails is left to the next poll."""
        order = self.orders.by_client_id(client_order_id)
        if order is None:
            return None  # ended, booked already (by a poll or an earlier update), or not ours
        try:
            return await self._one(order, None, at)
        except VenueMismatch as error:
            self.client.log.error("venue mismatch", order=client_order_id, detail=str(error))
        except ccxt.BaseError as error:
            self.client.note("settle streamed update", order, error)
        return None

    async def _one(
        self, order: Order, resting: VenueOrder | None, at: datetime
    ) -> Execution | None:
        if order.status in LOOKING:
            return await self.resolver.resolve(order, at)
        if resting is not None:
            if resting.filled == order.filled_amount and order.exchange_order_id is not None:
                return None
            return await self.booking.settle(order, resting, at)
        try:
            venue = await self.client.lookup(order)  # it left the book: how?
        except ccxt.BaseError as error:
            self.client.note("look up", order, error)
            return None
        if venue is None:
            self.client.log.error("order unknown to the venue", order=order.client_order_id)
            return None
        return await self.booking.settle(order, venue, at)
