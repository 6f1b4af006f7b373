"""Cancelling an order at the venue, by its client id.

- An order recorded before a restart (PENDING) may have left then: it is looked up first, and
  is "never sent" only when the venue does not have it.
- An order whose outcome is unknown is looked up first: not found (yet), there is nothing to
  cancel; ended meanwhile, that is the answer.
- When the cancel fails, the order may have ended first (filled) or the answer was lost: the
  venue's view of it decides. A refusal is retried after a back-off.
- The order ends CANCELED, or EXPIRED when it is cancelled because its expiry passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import ccxt.async_support as ccxt

from trader.broker.ccxt_orders import VenueMismatch, VenueOrder
from trader.broker.live.book import LOOKING
from trader.broker.live.parts import OrderParts
from trader.broker.venue_errors import Meaning
from trader.domain import Fill, Order, OrderStatus
from trader.domain.execution import Execution


@dataclass(frozen=True)
class Cancelling(OrderParts):
    """Works with the broker's shared order parts (`OrderParts`)."""

    async def cancel(
        self, order: Order, at: datetime, ending: OrderStatus = OrderStatus.CANCELED
    ) -> Execution | None:
        """The order ended as `ending`, or what ended it first (with its fills); None when it
        had already ended, or cannot be found yet, and nothing is new."""
        self.client.check_halted()
        current = self.orders.latest(order)
        if current.status is OrderStatus.PENDING:
            # Recorded before a restart, it may have left then: look before calling it unsent.
            maybe_sent = self.orders.take_recorded(current)
            found = await self.resolver.look_first(current, at) if maybe_sent else None
            if found is None:
                return Execution(current.transition(OrderStatus.CANCELED), reason="never sent")
            if found.order.status.is_terminal or found.order.status in LOOKING:
                return found
            return _merge(found.fills, await self._at_venue(found.order, at, ending), found.order)
        if current.status.is_terminal:
            return None
        fills: tuple[Fill, ...] = ()
        if current.status in LOOKING:
            resolved = await self.resolver.resolve(current, at)
            if resolved is None or resolved.order.status.is_terminal:
                return resolved  # not found (yet): nothing to cancel; or it ended
            fills, current = resolved.fills, resolved.order
        return _merge(fills, await self._at_venue(current, at, ending), current)

    async def _at_venue(self, order: Order, at: datetime, ending: OrderStatus) -> Execution | None:
        client, cid = self.client, order.client_order_id
        for attempt in range(client.retry.attempts):
            try:
                raw = await client.ask(
                    client.exchange.cancel_order(None, order.symbol, {"origClientOrderId": cid})
                )
                return await self.booking.settle(
                    order, VenueOrder.read(raw), at, canceled_as=ending
                )
            except ccxt.BaseError as error:
                found = client.note("cancel order", order, error)
                if found.meaning is Meaning.REFUSED and await client.back_off(attempt):
                    continue
                if found.meaning is Meaning.REJECTED:
                    return None
            except VenueMismatch as error:
                client.log.warning("unreadable cancel answer", order=cid, detail=str(error))
            # It ended first (filled), or the answer was lost: the venue's view decides.
            try:
                venue = await client.lookup(order)
            except (ccxt.BaseError, VenueMismatch) as error:
                if isinstance(error, ccxt.BaseError):
                    client.note("look up", order, error)
                return None
            if venue is None:
                client.log.error("order unknown to the venue", order=cid)
                return None
            if venue.status != "open":
                return await self.booking.settle(order, venue, at, canceled_as=ending)
        return None


def _merge(fills: tuple[Fill, ...], done: Execution | None, order: Order) -> Execution | None:
    """One execution from a lookup's fills and what followed them."""
    if done is None:
        return Execution(order, fills) if fills else None
    return Execution(done.order, fills + done.fills, done.reason)
