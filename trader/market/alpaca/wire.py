"""Alpaca's records in ccxt's unified shapes, the ones the market data step and the live
broker read (`trader.broker.ccxt_orders`): markets from assets, orders, trades from FILL
activities with their CFEE fees, and bars. Numbers stay decimal text, as Alpaca sent them.

Symbols: a stock is `AAPL/USD` here and `AAPL` at Alpaca; a crypto pair is `BTC/USD` in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from alpaca.data.timeframe import TimeFrame, TimeFrameUnit
from trader.domain import Timeframe, to_epoch_ms

STOCK_STEP = Decimal("0.000000001")  # Alpaca takes fractional shares to nine places
MIN_NOTIONAL = 1.0  # dollars
# Alpaca's order statuses as ccxt's: anything not ended is open.
_ENDED = {
    "filled": "closed",
    "canceled": "canceled",
    "expired": "expired",
    "rejected": "rejected",
    "replaced": "canceled",
}
_UNITS = {"m": TimeFrameUnit.Minute, "h": TimeFrameUnit.Hour, "d": TimeFrameUnit.Day}


def alpaca_timeframe(timeframe: Timeframe) -> TimeFrame:
    """Alpaca's bar length for `timeframe`; ValueError for one it has no bars of."""
    unit = timeframe.text[-1]
    amount = int(timeframe.text[:-1])
    if unit == "w" and amount == 1:
        return TimeFrame(1, TimeFrameUnit.Week)
    if unit not in _UNITS or (unit == "m" and amount > 59) or (unit == "h" and amount > 23):
        raise ValueError(
            f"Alpaca has no {timeframe} bars: use minutes (1m-59m), hours (1h-23h), 1d or 1w"
        )
    if unit == "d" and amount != 1:
        raise ValueError(f"Alpaca has no {timeframe} bars: use 1d")
    return TimeFrame(amount, _UNITS[unit])


def stamp(text: str | None) -> int | None:
    """Epoch ms of an RFC 3339 time (Alpaca writes nanoseconds; Python reads microseconds)."""
    if not text:
        return None
    head, dot, tail = text.replace("Z", "+00:00").partition(".")
    if dot:
        digits = "".join(c for c in tail if c.isdigit())
        zone = tail[len(digits) :]
        head = f"{head}.{digits[:6]}{zone}"
    return to_epoch_ms(datetime.fromisoformat(head))


def unified(asset: Mapping[str, Any]) -> str:
    symbol = str(asset["symbol"])
    return symbol if asset.get("class") == "crypto" else f"{symbol}/USD"


def market(asset: Mapping[str, Any]) -> dict[str, Any]:
    """A ccxt market from an Alpaca asset: whole shares where it is not fractionable."""
    crypto = asset.get("class") == "crypto"
    if crypto:
        amount_step = Decimal(str(asset.get("min_trade_increment") or STOCK_STEP))
        least = asset.get("min_order_size")
    else:
        amount_step = STOCK_STEP if asset.get("fractionable") else Decimal(1)
        least = None
    price_step = Decimal(str(asset.get("price_increment") or "0.01"))
    symbol = unified(asset)
    base, quote = symbol.split("/")
    return {
        "id": str(asset["symbol"]),
        "symbol": symbol,
        "base": base,
        "quote": quote,
        "type": "spot",
        "spot": True,
        "active": asset.get("status") == "active" and bool(asset.get("tradable")),
        "precision": {"amount": float(amount_step), "price": float(price_step)},
        # Alpaca takes no order under a dollar (crypto, and fractions of a share).
        "limits": {
            "amount": {"min": float(least) if least else None},
            "cost": {"min": MIN_NOTIONAL if crypto or asset.get("fractionable") else None},
        },
        "info": dict(asset),
    }


def order(raw: Mapping[str, Any], symbol: str) -> dict[str, Any]:
    """A ccxt order from an Alpaca order; its fills come separately (FILL activities)."""
    return {
        "id": raw["id"],
        "clientOrderId": raw.get("client_order_id"),
        "symbol": symbol,
        "side": raw.get("side"),
        "type": raw.get("type") or raw.get("order_type"),
        "amount": raw.get("qty"),
        "price": raw.get("limit_price"),
        "status": _ENDED.get(str(raw.get("status")), "open"),
        "filled": raw.get("filled_qty") or "0",
        "timestamp": stamp(raw.get("submitted_at") or raw.get("created_at")),
        "trades": [],
        "info": dict(raw),
    }


def liquidity(fill: Mapping[str, Any], placed: Mapping[str, Any] | None) -> str | None:
    """Taker for a market order's fills and a limit's at the moment it was placed, maker
    for a limit's later fills; None when the order is not at hand (Alpaca does not say)."""
    if placed is None:
        return None
    if placed.get("type") == "market" or fill.get("transaction_time") == placed.get("submitted_at"):
        return "taker"
    return "maker"


def trades(
    fills: Iterable[Mapping[str, Any]],
    fees: Iterable[Mapping[str, Any]],
    symbol: str,
    placed: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """ccxt trades from FILL activities, each with the CFEE fee of the same order, time and
    price (Alpaca takes a crypto fee from the asset the fill credits; stocks trade free): a
    market order that takes several levels of the book at once fills at one time, at several
    prices. An id is the activity's with its dashes taken out: ids then sort as the fills
    were made. `placed`: the order they belong to, when known (for taker or maker)."""
    by_fill = {_fill_key(f): f for f in fees}
    base, quote = symbol.split("/")
    out = []
    for fill in fills:
        fee = by_fill.get(_fill_key(fill))
        cost: str | None = None
        currency = quote
        if fee is not None:
            in_coin = Decimal(str(fee.get("qty") or "0")) != 0
            cost = str(-Decimal(str(fee.get("qty") if in_coin else fee.get("net_amount"))))
            currency = base if in_coin else quote
        out.append({
            "id": str(fill["id"]).replace("-", ""),
            "order": fill.get("order_id"),
            "symbol": symbol,
            "side": fill.get("side"),
            "amount": fill.get("qty"),
            "price": fill.get("price"),
            "timestamp": stamp(fill.get("transaction_time")),
            "takerOrMaker": liquidity(fill, placed),
            "fee": {"cost": cost if cost is not None else "0", "currency": currency},
            "info": dict(fill),
        })  # fmt: skip
    return out


def _fill_key(activity: Mapping[str, Any]) -> tuple[str, str, Decimal]:
    """What a fill and its fee share: the order, the time and the price."""
    price = Decimal(str(activity.get("price") or 0)).normalize()
    return str(activity.get("order_id")), str(activity.get("transaction_time")), price


def bar_row(bar: Mapping[str, Any]) -> list[Any]:
    return [stamp(bar["t"]), bar["o"], bar["h"], bar["l"], bar["c"], bar["v"]]
