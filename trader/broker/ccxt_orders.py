"""ccxt's unified order and trade structures, read into what the broker needs.

Numbers come from ccxt as floats parsed from the venue's decimal text; `decimal_from_float`
gives back that text exactly (the shortest decimal that prints as the float). A fill's id is
the venue's trade id with the market's id, so the same trade read twice (in a create answer
and from the trade history) is the same fill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.domain import (
    ZERO,
    Fill,
    Liquidity,
    Order,
    OrderStatus,
    decimal_from_float,
    exact,
    from_epoch_ms,
)

# ccxt's unified order statuses.
_ENDED = {"canceled": OrderStatus.CANCELED, "expired": OrderStatus.EXPIRED}


class VenueMismatch(Exception):
    """What the venue reports cannot be squared with what the ledger booked."""


def _decimal(value: Any, name: str) -> Decimal:
    if isinstance(value, str):
        return Decimal(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return decimal_from_float(float(value), name)
    raise VenueMismatch(f"the venue sent no {name}")


@dataclass(frozen=True)
class VenueOrder:
    """An order as the venue reports it."""

    exchange_id: str
    client_order_id: str | None
    symbol: str
    side: str
    amount: Decimal
    price: Decimal | None
    status: str  # ccxt: open, closed, canceled, expired, rejected
    filled: Decimal
    at: datetime | None
    trades: tuple[dict[str, Any], ...]  # fills the answer carried (a create's FULL answer)

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> VenueOrder:
        """The order in a ccxt answer; VenueMismatch for an answer that is not one."""
        try:
            return cls._read(raw)
        except (KeyError, TypeError, ValueError, ArithmeticError) as error:
            raise VenueMismatch(f"the venue's answer is not an order ({error!r})") from error

    @classmethod
    def _read(cls, raw: Mapping[str, Any]) -> VenueOrder:
        if not raw.get("id"):
            raise VenueMismatch("the venue's answer names no order")
        price = raw.get("price")
        stamp = raw.get("timestamp")
        return cls(
            exchange_id=str(raw["id"]),
            client_order_id=raw.get("clientOrderId"),
            symbol=str(raw["symbol"]),
            side=str(raw.get("side")),
            amount=_decimal(raw.get("amount"), "amount"),
            price=_decimal(price, "price") if price else None,
            status=str(raw.get("status")),
            filled=_decimal(raw.get("filled") or 0, "filled amount"),
            at=from_epoch_ms(int(stamp)) if isinstance(stamp, int | float) else None,
            trades=tuple(raw.get("trades") or ()),
        )


def fill_from_trade(
    trade: Mapping[str, Any],
    order: Order,
    market_id: str,
    currency_code: Any,
    *,
    default_at: datetime,
    default_liquidity: Liquidity,
) -> Fill:
    """A venue trade of `order` as a fill; its fee in whatever asset the venue charged, an
    estimate where the venue posts it later (`fee.estimated`: Alpaca; never on ccxt's)."""
    fee = trade.get("fee") or {}
    cost = fee.get("cost")
    amount = _decimal(trade.get("amount"), "trade amount")
    stamp = trade.get("timestamp")
    maker = trade.get("takerOrMaker")
    return Fill(
        fill_id=f"{market_id}-{trade['id']}",
        client_order_id=order.client_order_id,
        symbol=order.symbol,
        side=order.side,
        price=_decimal(trade.get("price"), "trade price"),
        amount=amount,
        fee=_decimal(cost, "fee") if cost is not None else ZERO,
        fee_currency=currency_code(fee.get("currency")) if cost else _quote(order.symbol),
        liquidity=Liquidity(maker) if maker in {"maker", "taker"} else default_liquidity,
        at=from_epoch_ms(int(stamp)) if isinstance(stamp, int | float) else default_at,
        fee_estimated=fee.get("estimated") is True,
    )


def _quote(symbol: str) -> str:
    return symbol.split("/", 1)[1].split(":", 1)[0]


def unbooked(order: Order, fills: Sequence[Fill]) -> list[Fill]:
    """The fills of `order` after those the ledger has booked. A venue's trades of one order
    never change once made, so the booked ones are the first that add up to the order's
    filled amount; anything else is a mismatch."""
    ordered = sorted(fills, key=lambda f: _trade_number(f.fill_id))
    seen = ZERO
    for index, fill in enumerate(ordered):
        if seen == order.filled_amount:
            return ordered[index:]
        with exact():
            seen += fill.amount
    if seen != order.filled_amount:
        raise VenueMismatch(
            f"order {order.client_order_id}: the ledger booked {order.filled_amount} filled, "
            f"the venue's trades of it add up to {seen} (no prefix matches)"
        )
    return []


def _trade_number(fill_id: str) -> tuple[int, str]:
    tail = fill_id.rsplit("-", 1)[-1]
    return (int(tail), "") if tail.isdigit() else (0, tail)


def advance(order: Order, venue: VenueOrder, fills: Sequence[Fill]) -> Order:
    """`order` after the venue's news: its new fills, then the status the venue reports.
    A venue that says FILLED before its trades are all visible leaves the order partly
    filled until they are; an order whose trades exceed the venue's own count is a mismatch."""
    current = order
    if current.status is OrderStatus.PENDING:  # recorded, sent, then the process died
        current = current.transition(OrderStatus.SUBMITTED)
    for fill in fills:
        current = current.with_fill(fill)
    if current.filled_amount > venue.filled:
        raise VenueMismatch(
            f"order {order.client_order_id}: trades add up to {current.filled_amount}, the "
            f"venue says {venue.filled} filled"
        )
    if current.status.is_terminal:
        return current
    ended = _ENDED.get(venue.status)
    if ended is not None and current.filled_amount == venue.filled:
        return current.transition(ended)
    if venue.status == "rejected" and current.status in {
        OrderStatus.SUBMITTED,
        OrderStatus.UNKNOWN,
    }:
        return current.transition(OrderStatus.REJECTED)
    if (
        current.status in {OrderStatus.SUBMITTED, OrderStatus.UNKNOWN}
        and current.filled_amount == 0
    ):
        return current.transition(OrderStatus.OPEN)
    return current


def balance_totals(balance: Mapping[str, Any]) -> dict[str, Decimal]:
    """Each asset's total in a `fetch_balance` answer: ccxt gives floats, our Alpaca adapter
    the venue's exact decimal strings (cash after fractional-share fills has more digits than
    a float keeps, and balances are compared exactly)."""
    totals = balance.get("total") or {}
    return {
        str(asset): Decimal(value) if isinstance(value, str) else decimal_from_float(value)
        for asset, value in totals.items()
        if isinstance(value, int | float) or (isinstance(value, str) and value)
    }
