"""Booking what the venue reports: an order brought up to the venue's state, with the fills
the ledger has not booked yet, read from the venue's trade history.

Fills come from the trades an answer carried, or, when those do not add up to what the venue
says was filled, from the order's whole trade history; fees are the venue's own, in the
asset it charged. The ledger's fills of an order are the first of its trades (`unbooked`);
what follows them is new.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace as evolve
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.broker.ccxt_orders import VenueOrder, advance, fill_from_trade, unbooked
from trader.broker.live.book import OpenOrders
from trader.broker.live.venue import VenueClient
from trader.domain import Fill, Liquidity, Order, OrderStatus
from trader.domain.execution import Execution
from trader.domain.money import exact

TRADES_PAGE = 1000


class FillBooking:
    def __init__(self, client: VenueClient, orders: OpenOrders) -> None:
        self._client = client
        self._orders = orders

    async def settle(
        self,
        order: Order,
        venue: VenueOrder,
        at: datetime,
        *,
        canceled_as: OrderStatus = OrderStatus.CANCELED,
        reason: str | None = None,
    ) -> Execution | None:
        """`order` brought up to what the venue reports, with the fills the ledger has not
        booked; None when nothing changed."""
        fills = [self._fill(t, order, venue.at or at, Liquidity.TAKER) for t in venue.trades]
        if sum((f.amount for f in fills), Decimal(0)) < venue.filled:
            fills = await self._order_trades(order, venue.exchange_id)  # the whole history
        new = read_by(order, venue, unbooked(order, fills))
        current = order
        if current.exchange_order_id != venue.exchange_id:
            current = evolve(current, exchange_order_id=venue.exchange_id)
        updated = advance(current, venue, new)
        if updated.status is OrderStatus.CANCELED and canceled_as is not OrderStatus.CANCELED:
            updated = evolve(updated, status=canceled_as)
        self._orders.track(updated)
        if updated == order and not new:
            return None
        return Execution(updated, tuple(new), reason)

    async def recent_trades(self, symbol: str, since: datetime) -> list[dict[str, Any]]:
        """Every trade of ours in `symbol` since `since`, page by page."""
        exchange = self._client.exchange
        trades: list[dict[str, Any]] = []
        page = await self._client.ask(
            exchange.fetch_my_trades(symbol, int(since.timestamp() * 1000), TRADES_PAGE)
        )
        # A client that pages the venue's history itself answers it whole (Alpaca's);
        # ccxt's answer a page at a time, continued from the last trade id.
        whole = bool(exchange.has.get("fetchMyTradesWhole"))
        while page:
            trades += page
            if len(page) < TRADES_PAGE or whole:
                break
            last = max(int(t["id"]) for t in page)
            page = await self._client.ask(
                exchange.fetch_my_trades(symbol, None, TRADES_PAGE, {"fromId": last + 1})
            )
        return trades

    async def _order_trades(self, order: Order, exchange_id: str) -> list[Fill]:
        raw = await self._client.ask(
            self._client.exchange.fetch_my_trades(
                order.symbol, None, None, {"orderId": exchange_id}
            )
        )
        return [self._fill(t, order, None, Liquidity.MAKER) for t in raw]

    def _fill(
        self, trade: Mapping[str, Any], order: Order, at: datetime | None, liquidity: Liquidity
    ) -> Fill:
        return fill_from_trade(
            trade, order, self._client.market_id(order.symbol),
            self._client.exchange.safe_currency_code,
            default_at=at or order.created_at, default_liquidity=liquidity,
        )  # fmt: skip


def read_by(order: Order, venue: VenueOrder, new: Sequence[Fill]) -> list[Fill]:
    """The first of the `new` fills (in the venue's order) that the venue's read of the order
    counts: trades read after the order may be newer than it (it filled again between the two
    reads); those wait for the next read, which counts them."""
    room = venue.filled - order.filled_amount
    kept: list[Fill] = []
    for fill in new:
        if fill.amount > room:
            break
        kept.append(fill)
        with exact():
            room -= fill.amount
    return kept
