"""How Alpaca writes things: RFC 3339 times, decimals as text, UUID order ids, symbols
("AAPL" for a stock, "BTC/USD" for crypto), its order statuses and activity records."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.emulator.market import Instrument
from trader.emulator.venue import VenueOrder, VenueTrade

STATUS = {
    "NEW": "new",
    "PARTIALLY_FILLED": "partially_filled",
    "FILLED": "filled",
    "CANCELED": "canceled",
    "EXPIRED": "expired",
}
ORDER_NAMESPACE = uuid.UUID("7f0c9b2e-0c1e-4f2a-9d3b-6a1e2f3c4d5e")


def rfc3339(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def text(value: Decimal | None) -> str | None:
    return None if value is None else format(value.normalize(), "f")


def alpaca_symbol(instrument: Instrument) -> str:
    return instrument.base if instrument.asset_class == "us_equity" else instrument.symbol


def order_uuid(order_id: int) -> str:
    return f"00000000-0000-4000-8000-{order_id:012d}"


def order_number(text_id: str) -> int | None:
    """The venue's order number behind one of our UUIDs, None for any other id."""
    head, _, tail = text_id.rpartition("-")
    return int(tail) if head == "00000000-0000-4000-8000" and tail.isdigit() else None


def asset_id(instrument: Instrument) -> str:
    return str(uuid.uuid5(ORDER_NAMESPACE, instrument.symbol))


def activity_id(trade: VenueTrade) -> str:
    """Alpaca's "<time to the ms>::<uuid>"; the uuid ends in the trade's number, so ids sort
    in the order the trades were made."""
    stamp = trade.time.strftime("%Y%m%d%H%M%S") + f"{trade.time.microsecond // 1000:03d}"
    return f"{stamp}::00000000-0000-4000-9000-{trade.trade_id:012d}"


def order_json(order: VenueOrder, instrument: Instrument) -> dict[str, Any]:
    filled = order.executed
    average = order.quote_executed / filled if filled else None
    ended = order.update_time if not order.is_open else None
    status = STATUS[order.status]
    return {
        "id": order_uuid(order.order_id),
        "client_order_id": order.client_order_id,
        "created_at": rfc3339(order.time),
        "updated_at": rfc3339(order.update_time or order.time),
        "submitted_at": rfc3339(order.time),
        "filled_at": rfc3339(ended) if status == "filled" else None,
        "expired_at": rfc3339(ended) if status == "expired" else None,
        "canceled_at": rfc3339(ended) if status == "canceled" else None,
        "failed_at": None,
        "replaced_at": None,
        "replaced_by": None,
        "replaces": None,
        "asset_id": asset_id(instrument),
        "symbol": alpaca_symbol(instrument),
        "asset_class": instrument.asset_class,
        "notional": None,
        "qty": text(order.quantity),
        "filled_qty": text(filled),
        "filled_avg_price": text(average),
        "order_class": "",
        "order_type": order.type.lower(),
        "type": order.type.lower(),
        "side": order.side.lower(),
        "position_intent": None,
        "time_in_force": (order.time_in_force or "day").lower(),
        "limit_price": text(order.price),
        "stop_price": None,
        "status": status,
        "extended_hours": False,
        "legs": None,
        "trail_percent": None,
        "trail_price": None,
        "hwm": None,
    }


def fill_json(trade: VenueTrade, order: VenueOrder, instrument: Instrument) -> dict[str, Any]:
    """A FILL activity (it carries no fee: Alpaca reports crypto fees as CFEE activities)."""
    done = sum((t.qty for t in order.trades if t.trade_id <= trade.trade_id), Decimal(0))
    return {
        "id": activity_id(trade),
        "activity_type": "FILL",
        "transaction_time": rfc3339(trade.time),
        "type": "fill" if done == order.quantity else "partial_fill",
        "price": text(trade.price),
        "qty": text(trade.qty),
        "side": order.side.lower(),
        "symbol": alpaca_symbol(instrument),
        "leaves_qty": text(order.quantity - done),
        "order_id": order_uuid(order.order_id),
        "cum_qty": text(done),
        "order_status": "filled" if done == order.quantity else "partially_filled",
    }


def fee_json(trade: VenueTrade, order: VenueOrder, instrument: Instrument) -> dict[str, Any]:
    """A CFEE activity: the crypto fee of one fill, taken from the asset it credited (the
    coin for a buy: `qty` negative; the quote for a sell: `net_amount` negative)."""
    in_coin = trade.commission_asset == instrument.base
    return {
        "id": activity_id(trade).replace("-9000-", "-9001-"),
        "activity_type": "CFEE",
        "date": trade.time.date().isoformat(),
        "transaction_time": rfc3339(trade.time),
        "symbol": alpaca_symbol(instrument),
        "order_id": order_uuid(order.order_id),
        "qty": text(-trade.commission) if in_coin else "0",
        "price": text(trade.price),
        "net_amount": "0" if in_coin else text(-trade.commission),
        "currency": trade.commission_asset,
        "description": f"crypto fee of fill {activity_id(trade)}",
    }


def asset_json(instrument: Instrument) -> dict[str, Any]:
    crypto = instrument.asset_class == "crypto"
    return {
        "id": asset_id(instrument),
        "class": instrument.asset_class,
        "exchange": "CRYPTO" if crypto else "NASDAQ",
        "symbol": alpaca_symbol(instrument),
        "name": instrument.symbol,
        "status": "active",
        "tradable": instrument.tradable,
        "marginable": not crypto,
        "maintenance_margin_requirement": 100 if crypto else 30,
        "shortable": instrument.shortable,
        "easy_to_borrow": instrument.easy_to_borrow,
        "fractionable": instrument.fractionable,
        "attributes": [],
        "min_order_size": text(instrument.min_qty) if crypto else None,
        "min_trade_increment": text(instrument.step_size) if crypto else None,
        "price_increment": text(instrument.tick_size),
    }


def error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}
