"""Alpaca's records in ccxt's unified shapes, the ones the market data step and the live
broker read (`trader.broker.ccxt_orders`): markets from assets, orders, trades from FILL
activities with their estimated fees (`fees`), and bars. Numbers stay decimal text, as
Alpaca sent them.

Symbols: a stock is `AAPL/USD` here and `AAPL` at Alpaca; a crypto pair is `BTC/USD` in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from alpaca.data.timeframe import TimeFrame, TimeFrameUnit
from trader.domain import Timeframe, from_epoch_ms, to_epoch_ms
from trader.market.alpaca.fees import estimate

NEW_YORK = ZoneInfo("America/New_York")  # Alpaca's account days: fees are posted by them

STOCK_STEP = Decimal("0.000000001")  # Alpaca takes fractional shares to nine places
MIN_NOTIONAL = 1.0  # dollars
# Alpaca's HTTP 403 to a Free plan asking for SIP data of the last 15 minutes (its market
# data FAQ, "Why am I getting HTTP 403 (Forbidden)?").
RECENT_SIP_REFUSED = "subscription does not permit querying recent SIP data"
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
        # Alpaca shorts stocks in whole shares, fractionable or not.
        "precision": {"amount": float(amount_step), "price": float(price_step)}
        | ({} if crypto else {"shortAmount": 1.0}),
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


CROSSED = "trader_crossed"  # set on a placed order: did the limit cross the quote when sent
PLACEMENT_MS = 1000  # Alpaca executes a marketable order within milliseconds of placing it


def liquidity(fill: Mapping[str, Any], placed: Mapping[str, Any] | None) -> str | None:
    """Alpaca does not say who took liquidity, so it is judged from the order: a market
    order's fills are taker, and so are a limit's that crossed the quote when it was placed
    (`placed[CROSSED]`, noted by the exchange as it sent the order) as far as they came as it
    was placed (within PLACEMENT_MS); a limit that rested, and the rest of one that crossed,
    is filled by others' orders: maker. A fill at the very instant of placing is taker
    whatever our quote said (the venue's book was ahead of it); a limit placed before a
    restart (its crossing not known) is judged by its fill's time alone. None when the
    order is not at hand: the broker's default for the path then decides."""
    if placed is None:
        return None
    if (placed.get("type") or placed.get("order_type")) == "market":
        return "taker"
    filled, sent = stamp(fill.get("transaction_time")), stamp(placed.get("submitted_at"))
    at_once = filled is not None and sent is not None and 0 <= filled - sent <= PLACEMENT_MS
    crossed = placed.get(CROSSED)
    if crossed is None:
        crossed = at_once
    instant = filled is not None and filled == sent
    return "taker" if (crossed and at_once) or instant else "maker"


def trades(
    fills: Iterable[Mapping[str, Any]],
    symbol: str,
    placed: Mapping[str, Any] | None = None,
    *,
    stock: bool,
    tier: int = 1,
) -> list[dict[str, Any]]:
    """ccxt trades from FILL activities, each with the fee Alpaca will post for it at the end
    of the day, estimated now (`fees.estimate`: the crypto fee `tier`'s rate, or a stock
    sale's regulatory fees) and marked `estimated`: Alpaca's fee records (CFEE, FEE) name no
    order and come later (`fees.postings`). An id is the activity's with its dashes taken
    out: ids then sort as the fills were made. `placed`: the order they belong to, when known
    (for taker or maker)."""
    out = []
    for fill in fills:
        maker = liquidity(fill, placed)
        at = stamp(fill.get("transaction_time"))
        day = from_epoch_ms(at).astimezone(NEW_YORK).date() if at is not None else None
        fee = estimate(
            symbol=symbol, stock=stock, side=str(fill.get("side")),
            price=Decimal(str(fill.get("price"))), qty=Decimal(str(fill.get("qty"))),
            liquidity=maker, day=day, tier=tier,
        )  # fmt: skip
        out.append({
            "id": str(fill["id"]).replace("-", ""),
            "order": fill.get("order_id"),
            "symbol": symbol,
            "side": fill.get("side"),
            "amount": fill.get("qty"),
            "price": fill.get("price"),
            "timestamp": at,
            "takerOrMaker": maker,
            "fee": fee,
            "info": dict(fill),
        })  # fmt: skip
    return out


def bar_row(bar: Mapping[str, Any]) -> list[Any]:
    return [stamp(bar["t"]), bar["o"], bar["h"], bar["l"], bar["c"], bar["v"]]
