"""How Alpaca writes things: RFC 3339 times, decimals as text, UUID order ids, symbols
("AAPL" for a stock, "BTC/USD" for crypto), its order statuses and activity records."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from trader.emulator.market import Instrument
from trader.emulator.sessions import NEW_YORK
from trader.emulator.venue import VenueOrder, VenueTrade

STATUS = {
    "NEW": "new",
    "PARTIALLY_FILLED": "partially_filled",
    "FILLED": "filled",
    "CANCELED": "canceled",
    "EXPIRED": "expired",
}
ORDER_NAMESPACE = uuid.UUID("7f0c9b2e-0c1e-4f2a-9d3b-6a1e2f3c4d5e")
MAINTENANCE_PERCENT = 30  # a stock's maintenance margin, % (Alpaca's asset example)


def rfc3339(when: datetime | None) -> str | None:
    """A time as Alpaca writes it (`go_time`), None as null: every time of one answer in one
    format, so that equal instants are equal text (the adapter compares a fill's time with
    its order's `submitted_at`)."""
    return None if when is None else go_time(when)


def go_time(when: datetime) -> str:
    """A time as Alpaca's servers (written in Go, RFC 3339 with nanoseconds) write it: the
    fraction without its trailing zeros, none at all on a whole second, "Z" for UTC
    (alpaca-py's fixtures: "2022-03-04T18:54:20.89822Z", "2022-05-17T09:30:00-04:00")."""
    whole = when.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    if not when.microsecond:
        return whole
    fraction = f"{when.microsecond:06d}".rstrip("0")
    cut = 19  # "YYYY-MM-DDTHH:MM:SS"
    return f"{whole[:cut]}.{fraction}{whole[cut:]}"


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
    """Alpaca's "<time to the ms>::<uuid>", the time New York's: alpaca-py's fixture of a
    FILL at 2022-03-04T14:53:18.500245Z has the id "20220304095318500::..." (and Alpaca's
    documented one at 2019-05-24T15:34:06.977Z "20190524113406977::..."). The uuid ends in
    the trade's number, so ids sort as the trades were made (but for the hour New York's
    clocks repeat in November: the emulator pages by time, `alpaca_history`)."""
    local = trade.time.astimezone(NEW_YORK)
    stamp = local.strftime("%Y%m%d%H%M%S") + f"{local.microsecond // 1000:03d}"
    return f"{stamp}::00000000-0000-4000-9000-{trade.trade_id:012d}"


def order_json(order: VenueOrder, instrument: Instrument) -> dict[str, Any]:
    filled = order.executed
    average = order.quote_executed / filled if filled else None
    ended = order.update_time if not order.is_open else None
    # "accepted": taken while the market is closed, not yet routed (Alpaca's order statuses)
    status = "accepted" if order.release_at is not None else STATUS[order.status]
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
        "position_intent": order.position_intent,
        "time_in_force": (order.time_in_force or "day").lower(),
        "limit_price": text(order.price),
        "stop_price": None,
        "status": status,
        "extended_hours": order.extended_hours,
        "legs": None,
        "trail_percent": None,
        "trail_price": None,
        "hwm": None,
        "subtag": None,
        "source": None,
    }


def fill_json(trade: VenueTrade, order: VenueOrder, instrument: Instrument) -> dict[str, Any]:
    """A FILL activity (it carries no fee: Alpaca reports crypto fees as CFEE activities), as
    the Trading API answers it: the fields of Alpaca's documented sample, with the
    `order_status` alpaca-py's fixtures and the Broker API's sample add. No `account_id`: the
    Broker API's records have one (alpaca-py's model requires it, being the Broker API's),
    the Trading API's documented sample has none (a key sees only its own account)."""
    done = sum((t.qty for t in order.trades if t.trade_id <= trade.trade_id), Decimal(0))
    return {
        "id": activity_id(trade),
        "activity_type": "FILL",
        "transaction_time": go_time(trade.time),
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


def fee_json(trade: VenueTrade, instrument: Instrument) -> dict[str, Any]:
    """A CFEE activity as Alpaca documents one (https://alpaca.markets/docs/crypto/activities/):
    no order id and no time, the fill's day (New York's, the account's days), the pair
    without its slash ("ETHUSD"), the fill's price, and the fee taken from what the fill
    credited: the coin for a buy (`qty` negative, `net_amount` "0"), dollars for a sell
    (`net_amount` negative; the documentation shows only a buy's record, so a sell's `qty` "0"
    and description are this emulator's guess). The id is the day's, as non-trade
    activities' are (alpaca-py's fixtures: "20220419000000000::...")."""
    day = trade.time.astimezone(NEW_YORK).date()
    in_coin = trade.commission_asset == instrument.base
    key = uuid.uuid5(ORDER_NAMESPACE, f"CFEE {instrument.symbol} {trade.trade_id}")
    return {
        "id": f"{day:%Y%m%d}000000000::{key}",
        "activity_type": "CFEE",
        "date": day.isoformat(),
        "net_amount": "0" if in_coin else text(-trade.commission),
        "description": f"Coin Pair Transaction Fee ({'Non USD' if in_coin else 'USD'})",
        "symbol": instrument.base + instrument.quote,
        "qty": text(-trade.commission) if in_coin else "0",
        "price": text(trade.price),
        "status": "executed",
    }


def regulatory_fee_json(
    kind: str, day: date, instrument: Instrument, amount: Decimal
) -> dict[str, Any]:
    """A FEE activity: a day's `kind` of regulatory fee ("REG": the SEC's Section 31 fee,
    "TAF": FINRA's) on a stock's sales, in the non-trade activity shape (alpaca-py's
    NonTradeActivity: date, net_amount, description, status, symbol)."""
    key = uuid.uuid5(ORDER_NAMESPACE, f"FEE {kind} {instrument.symbol} {day}")
    return {
        "id": f"{day:%Y%m%d}000000000::{key}",
        "activity_type": "FEE",
        "date": day.isoformat(),
        "net_amount": text(-amount),
        "description": f"{kind} fee",
        "symbol": alpaca_symbol(instrument),
        "status": "executed",
    }


def asset_json(instrument: Instrument) -> dict[str, Any]:
    """Alpaca's asset, as its documented examples write one per class: a stock carries its
    margin requirement (%, a number), crypto its order grid (text), never both; crypto is
    never marginable nor shortable (tests/data/alpaca/recorded/asset_*.json)."""
    head = {
        "id": asset_id(instrument),
        "class": instrument.asset_class,
        "symbol": alpaca_symbol(instrument),
        "name": instrument.symbol,
        "status": "active",
        "tradable": instrument.tradable,
        "fractionable": instrument.fractionable,
        "attributes": [],
    }
    if instrument.asset_class == "crypto":
        return head | {
            "exchange": "CRYPTO", "marginable": False, "shortable": False,
            "easy_to_borrow": False, "min_order_size": text(instrument.min_qty),
            "min_trade_increment": text(instrument.step_size),
            "price_increment": text(instrument.tick_size),
        }  # fmt: skip
    return head | {
        "exchange": "NASDAQ", "marginable": True, "shortable": instrument.shortable,
        "easy_to_borrow": instrument.easy_to_borrow,
        "maintenance_margin_requirement": MAINTENANCE_PERCENT,
    }  # fmt: skip


def error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}
