"""Orders whose outcome is unknown: sent, and the answer lost (a timeout, a dropped
connection, a 5xx, an unreadable body), or recorded before a restart and perhaps sent then.

Such an order is settled only by looking it up by its client id, before anything else is
done with it: found, it takes the venue's state and fills; not found once its window (the
request's recvWindow plus a second of clock skew, `trader.broker.live.book`) has passed since
it was sent, it can no longer arrive and is recorded as never having reached the venue. A
venue without a recvWindow (Alpaca) has no such moment: the order stays UNKNOWN, looked up
every poll, and only reconciliation, a while after the send, records it as never arrived. It
is never sent again; a later tick decides afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import ccxt.async_support as ccxt

from trader.broker.ccxt_orders import VenueMismatch
from trader.broker.live.book import LATE_S, OpenOrders
from trader.broker.live.fills import FillBooking
from trader.broker.live.venue import VenueClient
from trader.broker.venue_errors import BrokerHalt, Classified, Meaning
from trader.domain import Order, OrderStatus
from trader.domain.execution import Execution


def unreadable(error: VenueMismatch) -> Classified:
    """An answer that cannot be read says nothing: the outcome is unknown."""
    return Classified(Meaning.UNKNOWN, "bad_answer", str(error)[:200])


@dataclass(frozen=True)
class OutcomeResolver:
    client: VenueClient
    orders: OpenOrders
    booking: FillBooking

    async def lost(self, sent: Order, found: Classified, at: datetime) -> Execution:
        """`sent` went out and its answer was lost (`found` says how): UNKNOWN, looked up at
        once, its window starting now."""
        unknown = sent.transition(OrderStatus.UNKNOWN)
        self.orders.sent_now(sent)
        self.orders.track(unknown)
        resolved = await self.resolve(unknown, at)
        if resolved is not None:
            return resolved
        return Execution(unknown, reason=f"answer lost ({found.label}): looking it up")

    async def resolve(
        self, order: Order, at: datetime, *, reconciling: bool = False
    ) -> Execution | None:
        """Settle an UNKNOWN order by looking it up; None while it stays unknown.
        `reconciling`: asked by reconciliation, which may give up on a venue without a
        recvWindow."""
        try:
            venue = await self.client.lookup(order)
        except BrokerHalt:
            raise
        except (ccxt.BaseError, VenueMismatch) as error:
            if isinstance(error, ccxt.BaseError):
                self.client.note("look up", order, error)
            return None
        if venue is not None:
            return await self.booking.settle(order, venue, at, reason="found at the venue")
        if not self.orders.window_passed(order, reconciling=reconciling):
            return None
        never = order.transition(OrderStatus.REJECTED)
        self.orders.track(never)
        window = self.orders.window_s
        why = (
            f"never reached the venue: not found {window:.0f}s after it was sent"
            if window is not None
            else f"never reached the venue: not found by reconciliation, over {LATE_S:.0f}s "
            f"after it was sent ({self.client.name} has no recvWindow: an order it took "
            "would show by then)"
        )
        self.client.log.info("order never arrived", order=order.client_order_id)
        return Execution(never, reason=why)

    async def look_first(self, order: Order, at: datetime) -> Execution | None:
        """A restarted order's state at the venue; None when the venue does not have it."""
        try:
            venue = await self.client.lookup(order)
        except ccxt.BaseError as error:
            found = self.client.note("look up", order, error)
            return await self.lost(order.transition(OrderStatus.SUBMITTED), found, at)
        except VenueMismatch as error:
            return await self.lost(order.transition(OrderStatus.SUBMITTED), unreadable(error), at)
        if venue is None:
            return None
        settled = await self.booking.settle(order, venue, at, reason="sent before a restart")
        return settled or Execution(self.orders.latest(order))
