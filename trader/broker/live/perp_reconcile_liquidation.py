"""Liquidations at the venue, found by reconciliation: booked as the fills they are and
recorded as liquidations, not left as an unexplained trade and position mismatch.

The venue closes a liquidated position with an order of its own, whose client id starts
"autoclose-" (Binance USDⓈ-M user data stream, "Event: Order Update" ORDER_TRADE_UPDATE,
https://developers.binance.com/docs/derivatives/usds-margined-futures/user-data-streams/
Event-Order-Update: "starts with autoclose-: liquidation order", "adl_autoclose" for ADL,
"settlement_autoclose-" for delisting; "User's Force Orders" GET /fapi/v1/forceOrders shows
e.g. "autoclose-1596107620040000020"; helper B's emulator does the same,
`futures_settle._liquidate`). ADL and settlement closes are not liquidations: they stay
trades of orders the ledger does not know (a problem), as before. Its trade shows in
the account's trade history like any other (ccxt `fetch_my_trades`); the liquidation
clearance fee is an INSURANCE_CLEAR income row naming the trade (GET /fapi/v1/income,
`tradeId`; ccxt `fetch_funding_history` with `incomeType` INSURANCE_CLEAR, which its request
lets `params` replace). The fee is booked as the fill's fee, so the ledger's cash moves with
the venue's wallet. The venue does not say the mark that triggered it: the ledger's row takes
the fill's price (the bankruptcy price) for it, and the liquidation price the last position
read showed (else the fill's price).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.broker.ccxt_orders import fill_from_trade
from trader.broker.live.fills import FillBooking
from trader.broker.live.perp_positions import VenuePosition
from trader.broker.live.venue import VenueClient
from trader.domain import (
    ZERO,
    Fill,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Side,
    exact,
    from_epoch_ms,
)
from trader.domain.execution import Execution
from trader.domain.reconciliation import LedgerBook, ReportBuilder, VenueLiquidation

LIQUIDATION = "liquidation"  # the strategy the ledger books it under (as the engine's own)
LIQUIDATION_PREFIX = "autoclose-"


async def book_liquidations(
    client: VenueClient,
    booking: FillBooking,
    book: LedgerBook,
    since: datetime,
    last_read: Mapping[str, VenuePosition],
    margin_mode: str,
    report: ReportBuilder,
) -> None:
    """The liquidation trades since `since` the ledger has not booked, into `report`."""
    seen = {f.fill_id for e in report.executions for f in e.fills}
    for symbol in sorted(client.instruments):
        market_id = client.market_id(symbol)
        trades: dict[str, list[Mapping[str, Any]]] = {}
        for trade in await booking.recent_trades(symbol, since):
            fill_id = f"{market_id}-{trade['id']}"
            order_id = str(trade.get("order"))
            if fill_id in book.booked_fills or fill_id in seen or order_id in book.recent_orders:
                continue
            trades.setdefault(order_id, []).append(trade)
        fees: dict[str, Decimal] | None = None
        for order_id, found in sorted(trades.items()):
            venue = await client.ask(client.exchange.fetch_order(order_id, symbol))
            cid = str((venue or {}).get("clientOrderId") or "")
            if not cid.startswith(LIQUIDATION_PREFIX):
                continue  # someone else's order: the spot reconciliation reports it
            if fees is None:
                fees = await clearance_fees(client, symbol, since)
            done, row = liquidation(
                symbol, order_id, cid, found, fees, client, last_read.get(symbol), margin_mode
            )
            report.executions.append(done)
            report.liquidations.append(row)
            report.notes.append(
                f"liquidation: the venue closed {symbol} {row.position} at {row.close_price} "
                f"(its order {cid}), fee {row.fee}: booked as its fill, recorded as a liquidation"
            )


async def clearance_fees(client: VenueClient, symbol: str, since: datetime) -> dict[str, Decimal]:
    """The liquidation fees the venue took in `symbol` since `since`, by trade id (+ paid)."""
    rows = await client.ask(
        client.exchange.fetch_funding_history(
            symbol, int(since.timestamp() * 1000), 1000, {"incomeType": "INSURANCE_CLEAR"}
        )
    )
    fees: dict[str, Decimal] = {}
    for row in rows or ():
        info = row.get("info") or {}
        trade = str(info.get("tradeId") or "")
        with exact():
            fees[trade] = fees.get(trade, ZERO) - Decimal(str(info.get("income", row["amount"])))
    return fees


def liquidation(
    symbol: str,
    order_id: str,
    cid: str,
    trades: Sequence[Mapping[str, Any]],
    fees: Mapping[str, Decimal],
    client: VenueClient,
    last: VenuePosition | None,
    margin_mode: str,
) -> tuple[Execution, VenueLiquidation]:
    """The venue's liquidation order and its fills (each with its clearance fee), and the row."""
    side = Side.SELL if str(trades[0].get("side")).lower() == "sell" else Side.BUY
    with exact():
        amount = sum((Decimal(str(t["amount"])) for t in trades), ZERO)
    first = min(int(t["timestamp"]) for t in trades)
    at = from_epoch_ms(first)
    order = Order(cid, LIQUIDATION, symbol, side, OrderType.MARKET, amount, None, at)
    order = replace(order.transition(OrderStatus.SUBMITTED), exchange_order_id=order_id)
    fills: list[Fill] = []
    for trade in trades:
        fill = fill_from_trade(
            trade, order, client.market_id(symbol), client.exchange.safe_currency_code,
            default_at=at, default_liquidity=Liquidity.TAKER,
        )  # fmt: skip
        with exact():
            fill = replace(fill, fee=fill.fee + fees.get(str(trade["id"]), ZERO))
        fills.append(fill)
        order = order.with_fill(fill)
    price = fills[-1].price
    with exact():
        fee = sum((f.fee for f in fills), ZERO)
    liquidation_price = last.liquidation if last is not None and last.liquidation else price
    mode = last.margin_mode if last is not None and last.margin_mode else margin_mode
    row = VenueLiquidation(
        fills[0].fill_id, symbol, at, amount if side is Side.SELL else -amount, price,
        liquidation_price, price, fee, mode,
    )  # fmt: skip
    return Execution(order, tuple(fills), LIQUIDATION), row
