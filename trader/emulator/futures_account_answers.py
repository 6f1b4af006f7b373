"""What the futures emulator's account routes answer (Position Information V3, Account
Information V3, the balance), computed from the emulated account at the venue's marks."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trader.emulator.futures_account import FuturesAccount, Position
from trader.emulator.futures_market import maintenance_margin
from trader.emulator.futures_orders import FuturesVenue
from trader.emulator.futures_settle import liquidation_price
from trader.emulator.futures_wire import position_json
from trader.emulator.wire import ms, num


def positions_json(
    venue: FuturesVenue, account: FuturesAccount, symbols: set[str] | None
) -> list[dict[str, Any]]:
    """Position Information V3's rows: the symbols with a position or open orders."""
    marks = venue.marks()
    listings = {lst.instrument.venue_id: lst for lst in venue.perps.listings}
    rows = []
    # V3 lists the symbols with a position or open orders (Binance's Position Information V3).
    held = {p.symbol for p in account.open_positions()}
    held |= {o.symbol for o in account.open_orders()}
    for symbol in sorted(held):
        if symbols is not None and symbol not in symbols:
            continue
        position = account.positions.get(symbol) or Position(symbol)
        mark = marks[position.symbol]
        maintenance = maintenance_margin(
            listings[position.symbol].brackets, position.notional(mark)
        )
        liquidation = liquidation_price(venue, account, position.symbol)
        rows.append(
            position_json(
                account,
                position,
                mark,
                maintenance,
                liquidation,
                account.open_orders(position.symbol),
            )
        )
    return rows


def totals(venue: FuturesVenue, account: FuturesAccount) -> dict[str, Decimal]:
    """The account's totals as Account Information V3 names them."""
    marks = venue.marks()
    positions = account.open_positions()
    listings = {lst.instrument.venue_id: lst for lst in venue.perps.listings}
    unrealized = sum((p.unrealized(marks[p.symbol]) for p in positions), Decimal(0))
    position_im = sum(
        (account.position_initial_margin(p, marks[p.symbol]) for p in positions), Decimal(0)
    )
    order_im = sum(
        (account.order_initial_margin(o, marks[o.symbol]) for o in account.open_orders()),
        Decimal(0),
    )
    maintenance = sum(
        (maintenance_margin(listings[p.symbol].brackets, p.notional(marks[p.symbol]))
         for p in positions),
        Decimal(0),
    )  # fmt: skip
    available = account.available(marks)
    return {
        "walletBalance": account.wallet, "unrealizedProfit": unrealized,
        "marginBalance": account.wallet + unrealized, "maintMargin": maintenance,
        "initialMargin": position_im + order_im, "positionInitialMargin": position_im,
        "openOrderInitialMargin": order_im, "crossWalletBalance": account.cross_wallet,
        "crossUnPnl": account.cross_unrealized(marks), "availableBalance": available,
        "maxWithdrawAmount": max(min(available, account.cross_wallet), Decimal(0)),
    }  # fmt: skip


def account_json(venue: FuturesVenue, account: FuturesAccount) -> dict[str, Any]:
    """Account Information V3: totals, the USDT asset, the symbols with a position."""
    sums = totals(venue, account)
    now = ms(venue.clock())
    asset = {"asset": "USDT"} | {k: num(v) for k, v in sums.items()} | {"updateTime": now}
    top = {
        "totalInitialMargin": sums["initialMargin"],
        "totalMaintMargin": sums["maintMargin"],
        "totalWalletBalance": sums["walletBalance"],
        "totalUnrealizedProfit": sums["unrealizedProfit"],
        "totalMarginBalance": sums["marginBalance"],
        "totalPositionInitialMargin": sums["positionInitialMargin"],
        "totalOpenOrderInitialMargin": sums["openOrderInitialMargin"],
        "totalCrossWalletBalance": sums["crossWalletBalance"],
        "totalCrossUnPnl": sums["crossUnPnl"],
        "availableBalance": sums["availableBalance"],
        "maxWithdrawAmount": sums["maxWithdrawAmount"],
    }
    positions = [
        {k: row[k] for k in ("symbol", "positionSide", "positionAmt", "unrealizedProfit",
                             "isolatedMargin", "notional", "isolatedWallet", "initialMargin",
                             "maintMargin", "updateTime") if k in row}
        | {"unrealizedProfit": row["unRealizedProfit"]}
        for row in positions_json(venue, account, None)
    ]  # fmt: skip
    return (
        {"feeTier": 0, "canTrade": True, "canDeposit": True, "canWithdraw": True,
         "updateTime": now, "multiAssetsMargin": False, "tradeGroupId": -1}
        | {k: num(v) for k, v in top.items()}
        | {"assets": [asset], "positions": positions}
    )  # fmt: skip


def coins_json(venue: FuturesVenue) -> list[dict[str, Any]]:
    """What ccxt's fetchCurrencies reads when it has keys: one entry per asset."""
    assets = sorted(
        {lst.instrument.base for lst in venue.perps.listings}
        | {lst.instrument.quote for lst in venue.perps.listings}
    )
    return [
        {"coin": a, "name": a, "depositAllEnable": True, "withdrawAllEnable": True, "free": "0",
         "locked": "0", "trading": True, "isLegalMoney": False, "networkList": []}
        for a in assets
    ]  # fmt: skip
