"""Placing an order at the venue.

- The engine records every order durably before it comes here (the broker is `external`); an
  order recorded before a restart may have left then, so it is looked up first and sent only
  if the venue does not have it.
- It goes out with our deterministic client order id (`newClientOrderId`): the venue knows it
  by that id, so a lost answer is settled by looking it up (`trader.broker.live.unknown`),
  never by sending it again.
- Its amount and price must be exactly on the market's grid (ccxt's own precision rules) and
  above the market's minimum amount and notional, or it does not leave at all.
- A request refused before processing (429/418, a stale timestamp) is retried after a
  back-off; a rejection (insufficient funds, an invalid order) comes back with its reason;
  while the venue asked us to wait, new orders are cancelled unsent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import ccxt.async_support as ccxt

from trader.broker.ccxt_orders import VenueMismatch, VenueOrder
from trader.broker.live.parts import OrderParts
from trader.broker.live.unknown import unreadable
from trader.broker.venue_errors import Meaning
from trader.domain import Order, OrderStatus, Quote, QuoteSource, Side
from trader.domain.execution import Execution


@dataclass(frozen=True)
class Placement(OrderParts):
    """Works with the broker's shared order parts (`OrderParts`)."""

    # More request parameters for an order (the perp broker's reduceOnly); none on spot.
    params_for: Callable[[Order], Mapping[str, Any]] = field(default=lambda order: {})

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        self.client.check_halted()
        if self.orders.take_recorded(order):
            # Recorded before a restart, perhaps sent: look before sending, never resend.
            found = await self.resolver.look_first(order, at)
            if found is not None:
                return found
        refusal = self.refusal(order, quote)
        if refusal is not None:
            self.client.log.warning(
                "order refused before sending", order=order.client_order_id, reason=refusal
            )
            return Execution(order.transition(OrderStatus.REJECTED), reason=refusal)
        paused = self.client.paused()
        if paused is not None:
            why = f"not sent: the venue asked us to wait ({paused})"
            return Execution(order.transition(OrderStatus.CANCELED), reason=why)
        return await self._send(order.transition(OrderStatus.SUBMITTED), at)

    def refusal(self, order: Order, quote: Quote) -> str | None:
        """Why the order must not leave, checked here rather than by the venue."""
        exchange = self.client.exchange
        instrument = self.client.instruments.get(order.symbol)
        if instrument is None or order.symbol not in (exchange.markets or {}):
            return f"{order.symbol} is not a market this broker trades"
        if quote.source is QuoteSource.SYNTHETIC:
            return "the quote is synthetic: no real price to check the order against"
        amount = Decimal(exchange.amount_to_precision(order.symbol, float(order.amount)))
        if amount != order.amount:
            step, rounded = (format(x.normalize(), "f") for x in (instrument.amount_step, amount))
            return (
                f"amount {order.amount} is not on the market's grid of {step} "
                f"(would send {rounded})"
            )
        price = order.limit_price
        if price is not None:
            sent = Decimal(exchange.price_to_precision(order.symbol, float(price)))
            if sent != price:
                return f"limit {price} is not on the market's price grid (would send {sent})"
        check = price if price is not None else (quote.ask if order.side is Side.BUY else quote.bid)
        # A reduce-only order has no minimum notional (Binance -4164: "Order's notional must be
        # no smaller than 5 (unless you choose reduce only)"); its minimum amount still holds.
        waived = bool(self.params_for(order).get("reduceOnly"))
        if not instrument.tradable(order.amount, check) and not (
            waived and order.amount >= instrument.min_amount
        ):
            return (
                f"{order.amount} at {check} is below the market's minimum amount "
                f"{instrument.min_amount} or notional {instrument.min_notional}"
            )
        return None

    async def _send(self, sent: Order, at: datetime) -> Execution:
        client, cid = self.client, sent.client_order_id
        price = float(sent.limit_price) if sent.limit_price is not None else None
        for attempt in range(client.retry.attempts):
            try:
                raw = await client.ask(client.exchange.create_order(
                    sent.symbol, sent.type.value, sent.side.value, float(sent.amount), price,
                    {"newClientOrderId": cid, **self.params_for(sent)},
                ))  # fmt: skip
            except ccxt.BaseError as error:
                found = client.note("create order", sent, error)
                if found.meaning is Meaning.REFUSED:
                    if attempt < client.retry.attempts - 1 and await client.back_off(attempt):
                        continue
                    reason = f"not sent: {found.label}, retries used up"
                    return Execution(sent.transition(OrderStatus.REJECTED), reason=reason)
                if found.meaning is Meaning.REJECTED:
                    reason = f"{found.label}: {found.detail}"
                    return Execution(sent.transition(OrderStatus.REJECTED), reason=reason)
                return await self.resolver.lost(sent, found, at)
            try:
                venue = VenueOrder.read(raw)
            except VenueMismatch as error:  # an answer that cannot be read says nothing
                return await self.resolver.lost(sent, unreadable(error), at)
            client.log.info(
                "order sent", order=cid, venue_id=venue.exchange_id, status=venue.status
            )
            return await self.booking.settle(sent, venue, at) or Execution(sent)
        raise AssertionError("unreachable")  # pragma: no cover
