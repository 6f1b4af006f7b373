"""The facts an order's rules are judged on (`rules.OrderFacts`), read from Alpaca with no
more requests than the order needs. Before, every order cost five reads (account, positions,
clock, quote, today's fills); now:

- the account, for every order (its buying power moves with each order and fill);
- positions, only for a sale (what is held) or a pair quoted in a coin (the coin held);
- the session, from Alpaca's calendar day, read once per New York date (`session_at`);
- the ask, from the quote the data step read this tick when it is fresh;
- today's fills (the other side of a day trade), only when the pattern-day-trader rule could
  refuse the order: a stock, last_equity under $25,000, three day trades already.

Buying power (Alpaca's account fields): a stock on a margin account spends `buying_power`;
crypto is never marginable, so it spends `non_marginable_buying_power`; a cash account has
only its cash (its `buying_power` is that). A margin account is one with `multiplier` above
1 and `shorting_enabled` (Alpaca's paper accounts are; a cash account has multiplier 1)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from trader.market.alpaca import rules


class FactSource(Protocol):
    """What the facts are read from (the exchange, with its caches)."""

    async def account(self) -> dict[str, Any]: ...

    async def held(self) -> dict[str, Decimal]: ...

    async def calendar_day(self, local: datetime) -> Mapping[str, object] | None: ...

    async def latest_ask(self, symbol: str) -> Decimal | None: ...

    async def sides_today(self, symbol: str) -> set[str]: ...


def _decimal(account: Mapping[str, Any], field: str) -> Decimal | None:
    value = account.get(field)
    return Decimal(str(value)) if value not in (None, "") else None


def is_margin(account: Mapping[str, Any]) -> bool:
    """A margin account that may sell short (Alpaca's `multiplier` and `shorting_enabled`)."""
    multiplier = _decimal(account, "multiplier") or Decimal(1)
    return multiplier > 1 and bool(account.get("shorting_enabled"))


def buying_power(account: Mapping[str, Any], stock: bool) -> Decimal:
    """What an order of a stock (or of crypto) may spend, in USD."""
    if stock and is_margin(account):
        fields = ("buying_power", "cash")
    else:
        fields = ("non_marginable_buying_power", "cash")
    for field in fields:
        value = _decimal(account, field)
        if value is not None:
            return value
    return Decimal(0)


async def order_facts(
    source: FactSource,
    *,
    symbol: str,
    side: str,
    amount: Decimal,
    limit: Decimal | None,
    market: Mapping[str, Any],
    extended: bool,
    local_now: datetime,
) -> rules.OrderFacts:
    """The facts of one order; `market`: the ccxt market (its `info` is Alpaca's asset);
    `extended`: the stock may trade in the extended sessions; `local_now`: New York time."""
    asset = dict(market["info"])
    stock = asset.get("class") != "crypto"
    base, quote_asset = str(market["base"]), str(market["quote"])
    account = await source.account()
    held: dict[str, Decimal] = {}
    if side == "sell" or quote_asset != "USD":
        held = await source.held()
    session: rules.Session = "regular"
    if stock:
        session = rules.session_at(local_now, await source.calendar_day(local_now))
    ask: Decimal | None = None
    if limit is None or side == "sell":
        ask = await source.latest_ask(symbol)
    price = limit if limit is not None else (ask if side == "buy" else None)
    last_equity = _decimal(account, "last_equity") or _decimal(account, "equity") or Decimal(0)
    day_trades = int(account.get("daytrade_count") or 0)
    other_side = False
    if stock and last_equity < rules.PDT_EQUITY and day_trades >= rules.PDT_DAY_TRADES:
        other_side = ("sell" if side == "buy" else "buy") in await source.sides_today(symbol)
    cash = buying_power(account, stock) if quote_asset == "USD" else held.get(quote_asset)
    return rules.OrderFacts(
        symbol=symbol, side=side, amount=amount, price=price, limit=limit is not None,
        stock=stock, asset=asset, held=held.get(base, Decimal(0)),
        cash_available=cash if cash is not None else Decimal(0), session=session,
        extended=extended, last_equity=last_equity, day_trades=day_trades,
        other_side_today=other_side, margin=is_margin(account), ask=ask,
    )  # fmt: skip
