"""Binance USDⓈ-M futures' JSON shapes, as the emulator writes them.

Shapes from Binance's USDⓈ-M REST docs (developers.binance.com/docs/derivatives/
usds-margined-futures: Exchange Information, New Order, Query Order, Account Trade List,
Position Information V3, Account Information V3, Notional and Leverage Brackets, Get Income
History, Mark Price, Get Funding Rate History, Get Funding Rate Info, New Algo Order) and the
response samples ccxt quotes beside its parsers (ccxt 4.5.90, python/ccxt/binance.py:
parse_market, parse_order, parse_trade, parse_position_risk, parse_balance_custom,
parse_income, parse_funding_rate, parse_funding_rate_history, fetch_leverage_tiers).
Commissions are written positive (Binance's doc sample shows a negative one; its live answers
and ccxt's fee parsing take the cost as positive).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trader.emulator.futures_account import (
    FuturesAccount,
    FuturesOrder,
    FuturesTrade,
    Income,
    Position,
)
from trader.emulator.futures_market import Bracket, PerpListing
from trader.emulator.wire import ms, num

PERPETUAL_DELIVERY_MS = 4133404800000  # Binance's "deliveryDate" of a perpetual


def _decimals(step: Decimal) -> int:
    exponent = step.normalize().as_tuple().exponent
    return max(-exponent, 0) if isinstance(exponent, int) else 0


def symbol_info(listing: PerpListing) -> dict[str, Any]:
    i = listing.instrument
    lot = {"minQty": num(i.min_qty), "maxQty": "1000000", "stepSize": num(i.step_size)}
    return {
        "symbol": i.venue_id, "pair": i.venue_id, "contractType": "PERPETUAL",
        "deliveryDate": PERPETUAL_DELIVERY_MS, "onboardDate": 1569398400000,
        "status": "TRADING", "maintMarginPercent": "2.5000", "requiredMarginPercent": "5.0000",
        "baseAsset": i.base, "quoteAsset": i.quote, "marginAsset": i.quote,
        "pricePrecision": _decimals(i.tick_size), "quantityPrecision": _decimals(i.step_size),
        "baseAssetPrecision": 8, "quotePrecision": 8, "underlyingType": "COIN",
        "underlyingSubType": [], "settlePlan": 0, "triggerProtect": "0.0500",
        "liquidationFee": "0.012500", "marketTakeBound": "0.05", "maxMoveOrderLimit": 10000,
        "filters": [
            {"filterType": "PRICE_FILTER", "minPrice": num(i.tick_size),
             "maxPrice": "1000000", "tickSize": num(i.tick_size)},
            {"filterType": "LOT_SIZE"} | lot,
            {"filterType": "MARKET_LOT_SIZE"} | lot,
            {"filterType": "MAX_NUM_ORDERS", "limit": 200},
            {"filterType": "MAX_NUM_ALGO_ORDERS", "limit": 10},
            {"filterType": "MIN_NOTIONAL", "notional": num(i.min_notional)},
            {"filterType": "PERCENT_PRICE", "multiplierUp": "1.0500",
             "multiplierDown": "0.9500", "multiplierDecimal": "4"},
        ],
        "orderTypes": ["LIMIT", "MARKET", "STOP", "STOP_MARKET", "TAKE_PROFIT",
                       "TAKE_PROFIT_MARKET", "TRAILING_STOP_MARKET"],
        "timeInForce": ["GTC", "IOC", "FOK", "GTX", "GTD"],
    }  # fmt: skip


def order_json(order: FuturesOrder) -> dict[str, Any]:
    return {
        "orderId": order.order_id,
        "symbol": order.symbol,
        "status": order.status,
        "clientOrderId": order.client_order_id,
        "price": num(order.price or Decimal(0)),
        "avgPrice": num(order.avg_price),
        "origQty": num(order.quantity),
        "executedQty": num(order.executed),
        "cumQty": num(order.executed),
        "cumQuote": num(order.cum_quote),
        "timeInForce": order.time_in_force,
        "type": order.type,
        "reduceOnly": order.reduce_only,
        "closePosition": order.close_position,
        "side": order.side,
        "positionSide": order.position_side,
        "stopPrice": num(Decimal(0)),
        "workingType": order.working_type,
        "priceProtect": False,
        "origType": order.type,
        "priceMatch": "NONE",
        "selfTradePreventionMode": "EXPIRE_MAKER",
        "goodTillDate": 0,
        "time": ms(order.time),
        "updateTime": ms(order.update_time or order.time),
    }


def algo_json(order: FuturesOrder) -> dict[str, Any]:
    return {
        "algoId": order.order_id,
        "clientAlgoId": order.client_order_id,
        "algoType": "CONDITIONAL",
        "orderType": order.type,
        "symbol": order.symbol,
        "side": order.side,
        "positionSide": order.position_side,
        "timeInForce": order.time_in_force,
        "quantity": num(order.quantity),
        "algoStatus": order.status,
        "triggerPrice": num(order.trigger_price or Decimal(0)),
        "price": num(order.price or Decimal(0)),
        "icebergQuantity": None,
        "selfTradePreventionMode": "EXPIRE_MAKER",
        "workingType": order.working_type,
        "priceMatch": "NONE",
        "closePosition": order.close_position,
        "priceProtect": False,
        "reduceOnly": order.reduce_only,
        "createTime": ms(order.time),
        "updateTime": ms(order.update_time or order.time),
        "triggerTime": ms(order.update_time) if order.triggered_order and order.update_time else 0,
        "goodTillDate": 0,
    }


def trade_json(trade: FuturesTrade) -> dict[str, Any]:
    return {
        "buyer": trade.side == "BUY",
        "commission": num(trade.commission),
        "commissionAsset": trade.commission_asset,
        "id": trade.trade_id,
        "maker": trade.is_maker,
        "orderId": trade.order_id,
        "price": num(trade.price),
        "qty": num(trade.qty),
        "quoteQty": num(trade.quote_qty),
        "realizedPnl": num(trade.realized_pnl),
        "marginAsset": "USDT",
        "side": trade.side,
        "positionSide": "BOTH",
        "symbol": trade.symbol,
        "time": ms(trade.time),
    }


def income_json(row: Income) -> dict[str, Any]:
    return {
        "symbol": row.symbol,
        "incomeType": row.income_type,
        "income": num(row.income),
        "asset": "USDT",
        "info": row.info,
        "time": ms(row.time),
        "tranId": row.tran_id,
        "tradeId": row.trade_id,
    }


def brackets_json(symbol: str, brackets: list[Bracket]) -> dict[str, Any]:
    return {
        "symbol": symbol,
        "notionalCoef": 1.0,
        "brackets": [
            {
                "bracket": b.bracket,
                "initialLeverage": b.initial_leverage,
                "notionalCap": float(b.notional_cap),
                "notionalFloor": float(b.notional_floor),
                "maintMarginRatio": float(b.maint_margin_ratio),
                "cum": float(b.cum),
            }
            for b in brackets
        ],
    }


def position_json(
    account: FuturesAccount,
    position: Position,
    mark: Decimal,
    maintenance: Decimal,
    liquidation: Decimal | None,
    open_orders: list[FuturesOrder],
) -> dict[str, Any]:
    """Position Information V3: one-way, so positionSide BOTH."""
    isolated = account.is_isolated(position.symbol)
    unrealized = position.unrealized(mark)
    initial = account.position_initial_margin(position, mark)
    order_margin = sum((account.order_initial_margin(o, mark) for o in open_orders), Decimal(0))
    bids = sum(
        (o.remaining * (o.price or mark) for o in open_orders if o.side == "BUY"), Decimal(0)
    )
    asks = sum(
        (o.remaining * (o.price or mark) for o in open_orders if o.side == "SELL"), Decimal(0)
    )
    return {
        "symbol": position.symbol,
        "positionSide": "BOTH",
        "positionAmt": num(position.size),
        "entryPrice": num(position.entry),
        "breakEvenPrice": num(position.entry),
        "markPrice": num(mark),
        "unRealizedProfit": num(unrealized),
        "liquidationPrice": num(liquidation or Decimal(0)),
        "isolatedMargin": num(position.isolated_wallet + unrealized if isolated else Decimal(0)),
        "notional": num(position.notional(mark)),
        "marginAsset": "USDT",
        "isolatedWallet": num(position.isolated_wallet if isolated else Decimal(0)),
        "initialMargin": num(initial + order_margin),
        "maintMargin": num(maintenance),
        "positionInitialMargin": num(initial),
        "openOrderInitialMargin": num(order_margin),
        "adl": 0,
        "bidNotional": num(bids),
        "askNotional": num(asks),
        "updateTime": ms(position.update_time) if position.update_time else 0,
    }
