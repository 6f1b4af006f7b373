"""Alpaca through its official SDK (alpaca-py), answering the unified calls the market data
step and the live broker make of a ccxt exchange (`load_markets`, `fetch_ohlcv`,
`fetch_bids_asks`, `create_order`, `fetch_order`, `cancel_order`, `fetch_open_orders`,
`fetch_my_trades`, `fetch_balance`), with failures raised as ccxt's error classes
(`errors`). So one live broker, with its guarantees (an order sent once under our client id,
lost answers looked up by that id, fills booked once, reconciliation), serves both venues.
This module is the trading side; the read side (markets, bars, quotes, calling the SDK) is
`trader.market.alpaca.markets`.

- Fills are polled, as with ccxt: an order's fills are its FILL activities, each with its fee
  estimated (Alpaca posts fees at the end of the day, CFEE and FEE activities naming no
  order: `fetch_fee_postings`, `fees`). The trade-updates stream (`stream`) only says
  when to look at an order at once.
- Account rules are checked before an order leaves (`rules`, on `facts` read with as few
  requests as the order needs): refused with the reason.
- Alpaca has no recvWindow: an order whose answer was lost may still appear later, so
  `has["recvWindow"]` is False and the live broker leaves it unknown until reconciliation.
- The orders we placed are kept as placed (they never change): their fills need no
  second read of the order.
- Maker or taker: a market order's fills, and a limit's that crossed the quote when it was
  placed, are taker; a resting limit's are maker (`wire.liquidity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import ccxt.async_support as ccxt

from alpaca.trading.enums import OrderSide, QueryOrderStatus, TimeInForce
from alpaca.trading.requests import GetOrdersRequest, LimitOrderRequest, MarketOrderRequest
from trader.domain import from_epoch_ms
from trader.market.alpaca import facts, fees, rules, wire
from trader.market.alpaca.markets import NEW_YORK, AlpacaMarkets
from trader.market.alpaca.markets import as_list as _list
from trader.market.alpaca.markets import as_object as _dict

__all__ = ["NEW_YORK", "AlpacaExchange"]
ACTIVITY_PAGE = 100
KEPT_ORDERS = 10_000  # orders placed here whose placing is remembered (maker or taker)


class AlpacaExchange(AlpacaMarkets):
    """The trading side: orders, fills, fee postings and balances, with Alpaca's account
    rules checked before an order leaves."""

    async def create_order(
        self,
        symbol: str,
        type: str,  # ccxt's name
        side: str,
        amount: float,
        price: float | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        cid = str((params or {}).get("newClientOrderId") or "")
        qty = Decimal(repr(amount))  # as asked: never quietly less (the rules judge it)
        limit = Decimal(self.price_to_precision(symbol, price)) if price is not None else None
        stock = self.is_stock(symbol)
        known = await self._facts(symbol, side, qty, limit)
        why = rules.refusal(known)
        if why is None and qty != Decimal(self.amount_to_precision(symbol, amount)):
            step = self.market(symbol)["precision"]["amount"]
            why = f"{symbol}: {qty} is not a multiple of Alpaca's smallest amount {step}"
        if why is not None:
            raise ccxt.InvalidOrder(f"alpaca: not sent: {why}")
        extended = stock and known.session in {"pre", "after"}
        tif = TimeInForce(rules.time_in_force(stock, limit is not None, qty % 1 != 0, extended))
        common: dict[str, Any] = {
            "symbol": self.market(symbol)["id"], "qty": float(qty), "client_order_id": cid,
            "side": OrderSide(side), "time_in_force": tif,
        }  # fmt: skip
        request = (
            LimitOrderRequest(**common, limit_price=float(limit), extended_hours=extended)
            if limit is not None
            else MarketOrderRequest(**common)
        )
        self._crossed[cid] = await self._crosses(symbol, side, limit)
        raw = _dict(await self._call(self._trading.submit_order, request))
        placed = wire.order(raw, symbol)
        self._placed[str(raw["id"])] = raw
        for kept in (self._placed, self._crossed):  # the newest orders: those still filling
            while len(kept) > KEPT_ORDERS:
                del kept[next(iter(kept))]
        return placed

    async def _crosses(self, symbol: str, side: str, limit: Decimal | None) -> bool:
        """Whether the order takes liquidity as it is placed: a market order, or a limit at
        or through the other side of the quote now (None known: not marketable)."""
        if limit is None:
            return True
        quote = await self.latest_quote(symbol)
        touch = quote.get("ask" if side == "buy" else "bid")
        if touch is None:
            return False
        return limit >= Decimal(str(touch)) if side == "buy" else limit <= Decimal(str(touch))

    async def _facts(
        self, symbol: str, side: str, qty: Decimal, limit: Decimal | None
    ) -> rules.OrderFacts:
        """What the rules need, read with as few requests as this order needs (`facts`); a
        read that fails refuses the order (it is not sent; the next tick decides afresh)."""
        try:
            return await facts.order_facts(
                self, symbol=symbol, side=side, amount=qty, limit=limit,
                market=self.market(symbol), extended=symbol in self._extended,
                local_now=self._clock.now().astimezone(NEW_YORK),
            )  # fmt: skip
        except ccxt.BaseError as error:
            why = f"alpaca: not sent: the account could not be read ({error})"
            raise ccxt.InvalidOrder(why) from error

    async def held(self) -> dict[str, Decimal]:
        """Each position's quantity available to sell, by asset (negative: short)."""
        return await self._held()

    async def _held(self, available: bool = True) -> dict[str, Decimal]:
        """Each position's quantity by asset (available to sell, or all of it)."""
        positions = _list(await self._call(self._trading.get_all_positions))
        field = "qty_available" if available else "qty"
        out = {}
        for p in positions:
            crypto = p.get("asset_class") == "crypto"
            asset = str(p["symbol"]).removesuffix("USD") if crypto else str(p["symbol"])
            out[asset] = Decimal(str(p.get(field) or p.get("qty") or 0))
        return out

    async def sides_today(self, symbol: str) -> set[str]:
        """The sides `symbol` traded on today (New York's date)."""
        today = self._clock.now().astimezone(NEW_YORK)
        opened = today.replace(hour=0, minute=0, second=0, microsecond=0)
        return {str(f.get("side")) for f in await self._activities("FILL", opened, symbol)}

    async def fetch_order(
        self,
        id: str | None,
        symbol: str,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        cid = (params or {}).get("origClientOrderId")
        if cid is not None:
            raw = await self._call(self._trading.get_order_by_client_id, str(cid))
        else:
            raw = await self._call(self._trading.get_order_by_id, str(id))
        return wire.order(_dict(raw), symbol)

    async def cancel_order(
        self,
        id: str | None,
        symbol: str,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Cancel by venue id or client id; the order as it stands after the cancel."""
        order_id = id
        if order_id is None:
            order_id = (await self.fetch_order(None, symbol, params))["id"]
        await self._call(self._trading.cancel_order_by_id, str(order_id), cancelling=True)
        return await self.fetch_order(order_id, symbol)

    async def fetch_open_orders(self, symbol: str) -> list[dict[str, Any]]:
        request = GetOrdersRequest(
            status=QueryOrderStatus.OPEN, symbols=[self.market(symbol)["id"]], limit=500
        )
        raw = await self._call(self._trading.get_orders, request)
        return [wire.order(o, symbol) for o in _list(raw)]

    async def fetch_my_trades(
        self,
        symbol: str,
        since: int | None = None,
        limit: int | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Our fills of `symbol` since `since` (ms), or those of one order (`orderId`)."""
        order_id = (params or {}).get("orderId")
        placed: dict[str, Any] | None = None
        if order_id is not None:
            # As we placed it (it never changes), else read; with whether it crossed.
            placed = self._placed.get(str(order_id)) or _dict(
                await self._call(self._trading.get_order_by_id, str(order_id))
            )
            placed = placed | {wire.CROSSED: self._crossed.get(str(placed.get("client_order_id")))}
            after = datetime.fromtimestamp((wire.stamp(placed.get("created_at")) or 0) / 1000, UTC)
            after -= timedelta(seconds=1)
        else:
            after = from_epoch_ms(since) if since is not None else self._clock.now() - timedelta(
                days=1)  # fmt: skip
        fills = await self._activities("FILL", after, symbol)
        if order_id is not None:
            fills = [f for f in fills if f.get("order_id") == order_id]
        return wire.trades(fills, symbol, placed, stock=self.is_stock(symbol), tier=self._fee_tier)

    async def fetch_fee_postings(self, since: datetime) -> list[dict[str, Any]]:
        """The fees Alpaca posted (CFEE, FEE activities) for days from `since`'s on (`fees`)."""
        unified: dict[str, str] = {}
        for symbol, listed in (self.markets or {}).items():
            unified |= {listed["id"]: symbol, str(listed["id"]).replace("/", ""): symbol}
        day = since.astimezone(NEW_YORK).replace(hour=0, minute=0, second=0, microsecond=0)
        after = day - timedelta(days=1)  # a fee's time is its date's start (UTC, New York)
        kinds = [await self._activities(kind, after, None) for kind in fees.FEE_KINDS]
        return fees.postings([a for page in kinds for a in page], unified)

    async def _activities(
        self, kind: str, after: datetime, symbol: str | None
    ) -> list[dict[str, Any]]:
        """Every `kind` activity (of `symbol`, or all) after `after`, oldest first, by page."""
        wanted = self.market(symbol)["id"] if symbol is not None else None
        names = {wanted, wanted.replace("/", "")} if wanted is not None else None
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: dict[str, Any] = {"after": after.isoformat(), "direction": "asc",
                                     "page_size": ACTIVITY_PAGE}  # fmt: skip
            if token is not None:
                query["page_token"] = token
            page = _list(await self._call(self._trading.get, f"/account/activities/{kind}", query))
            out += [a for a in page if names is None or a.get("symbol") in names]
            if len(page) < ACTIVITY_PAGE:
                return out
            token = str(page[-1]["id"])

    async def fetch_balance(self) -> dict[str, Any]:
        """Cash (USD) and every position's quantity, in ccxt's `total` shape but as Alpaca's
        exact decimal strings: a float keeps 16 digits, and cash after fractional-share fills
        has more (a reconcile compares them exactly)."""
        account = _dict(await self._call(self._trading.get_account))
        total: dict[str, str] = {"USD": str(account.get("cash"))}
        total |= {asset: str(qty) for asset, qty in (await self._held(available=False)).items()}
        return {"total": total}
