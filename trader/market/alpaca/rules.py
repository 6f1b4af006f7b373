"""Alpaca's account rules, checked before an order is sent so that it is refused here with
the reason rather than at Alpaca: trading hours for stocks, whole shares where an asset is
not fractionable, shorting only where Alpaca lends the stock, the pattern-day-trader rule,
and buying power. Each check reads facts the exchange fetched; none calls out itself."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

PDT_EQUITY = Decimal(25_000)
PDT_DAY_TRADES = 3  # the fourth within five sessions is refused


@dataclass(frozen=True)
class OrderFacts:
    symbol: str
    side: str  # buy | sell
    amount: Decimal
    price: Decimal | None  # the limit, else the price a market order would pay now
    limit: bool
    stock: bool
    asset: dict[str, object]  # Alpaca's asset record
    held: Decimal  # the position's available quantity now
    cash_available: Decimal  # buying power in the pair's quote (USD cash, or a USDT position)
    market_open: bool  # stocks: the regular session (Alpaca's clock)
    extended: bool  # stocks: this symbol may trade in the pre- and after-market
    equity: Decimal
    day_trades: int  # Alpaca's daytrade_count (last five sessions)
    other_side_today: bool  # this stock traded on the other side in today's session


def refusal(facts: OrderFacts) -> str | None:
    """Why Alpaca would refuse the order, in words; None when it may go."""
    for check in (_tradable, _whole_shares, _hours, _short, _pattern_day_trader, _buying_power):
        why = check(facts)
        if why is not None:
            return why
    return None


def _whole(facts: OrderFacts) -> bool:
    return facts.amount == facts.amount.to_integral_value()


def _tradable(facts: OrderFacts) -> str | None:
    if facts.asset.get("tradable") and facts.asset.get("status") == "active":
        return None
    return f"{facts.symbol} is not tradable at Alpaca"


def _whole_shares(facts: OrderFacts) -> str | None:
    if _whole(facts) or facts.asset.get("fractionable"):
        return None
    return f"{facts.symbol} trades in whole shares only at Alpaca: {facts.amount} is a fraction"


def _hours(facts: OrderFacts) -> str | None:
    if not facts.stock or facts.market_open:
        return None
    if not facts.extended:
        return (
            f"the market for {facts.symbol} is closed: no stock order outside the session "
            "(exchange.alpaca.extended_hours lists stocks that may trade then)"
        )
    if not facts.limit:
        return f"{facts.symbol}: outside the regular session Alpaca takes limit orders only"
    return None


def _short(facts: OrderFacts) -> str | None:
    if facts.side != "sell" or facts.amount <= facts.held:
        return None
    name, short = facts.symbol, facts.amount - facts.held
    if not facts.stock:
        return f"{name}: Alpaca does not short crypto (sell {facts.amount}, hold {facts.held})"
    if not (facts.asset.get("shortable") and facts.asset.get("easy_to_borrow")):
        return f"{name} is not shortable at Alpaca (a short of {short} was asked)"
    return None if _whole(facts) else f"{name}: Alpaca shorts whole shares only"


def _pattern_day_trader(facts: OrderFacts) -> str | None:
    if (
        facts.stock
        and facts.other_side_today
        and facts.equity < PDT_EQUITY
        and facts.day_trades >= PDT_DAY_TRADES
    ):
        return (
            f"{facts.symbol}: a fourth day trade in five sessions with equity {facts.equity} "
            f"under {PDT_EQUITY} (the pattern-day-trader rule)"
        )
    return None


def _buying_power(facts: OrderFacts) -> str | None:
    if facts.side != "buy" or facts.price is None:
        return None
    cost = facts.amount * facts.price
    if cost <= facts.cash_available:
        return None
    return f"{facts.symbol}: buying power {facts.cash_available} is short of {cost}"


def time_in_force(stock: bool, limit: bool, fractional: bool, extended: bool) -> str:
    """Stocks: day for market, fractional and extended-hours orders, else gtc; crypto: gtc
    (a market order's unfilled rest ends at once)."""
    if not stock:
        return "gtc"
    if not limit or fractional or extended:
        return "day"
    return "gtc"
