"""Alpaca's account rules, checked before an order is sent so that it is refused here with
the reason rather than at Alpaca: trading hours for stocks (the regular session, and
Alpaca's extended sessions for the stocks allowed them), whole shares where an asset is not
fractionable, shorting only on a margin account and where Alpaca lends the stock, the
pattern-day-trader rule, and buying power. Each check reads facts the exchange fetched; none
calls out itself.

Sources: Alpaca's "Orders at Alpaca" (docs.alpaca.markets/docs/orders-at-alpaca: buying power
for buys and short sales, extended hours: limit orders with time_in_force day and
extended_hours true, pre-market 04:00-09:30 and after-hours 16:00-20:00 ET), its support
page "How do you trade in extended hours" (the same hours), and "Pattern Day Trader
Protection" (the rule judges on the previous close's equity, `last_equity`, not the equity
now). Fractions in the extended sessions: the documentation (alpacahq/alpaca-docs,
trading/orders.md: "Fractional shares and orders with notional sizes are not available during
extended hours trading") and a 2023 announcement on Alpaca's blog (fractional limit orders
in the extended sessions) disagree; the documentation is followed, as the emulator does:
a fraction is refused then, which costs a tick at worst, where the other reading could send
orders Alpaca rejects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, time
from decimal import Decimal
from typing import Literal

PDT_EQUITY = Decimal(25_000)
PDT_DAY_TRADES = 3  # the fourth within five sessions is refused
SHORT_MARKUP = Decimal("1.03")  # a short sale's value: 3% above the ask (Alpaca's docs)
Session = Literal["regular", "pre", "after", "closed"]
_SESSION_WORDS = {"pre": "pre-market", "after": "after-hours"}


def session_at(local: datetime, day: Mapping[str, object] | None) -> Session:
    """The stock market's session at `local` (New York time) from Alpaca's calendar day of
    that date (`open`/`close` "HH:MM", `session_open`/`session_close` "HHMM"), None when it
    is not a trading day."""
    if day is None or str(day.get("date")) != local.date().isoformat():
        return "closed"

    def at(field: str, default: str) -> time:
        text = str(day.get(field) or default).replace(":", "")
        return time(int(text[:2]), int(text[2:4]))

    now = local.time()
    if at("open", "0930") <= now < at("close", "1600"):
        return "regular"
    if at("session_open", "0400") <= now < at("open", "0930"):
        return "pre"
    if at("close", "1600") <= now < at("session_close", "2000"):
        return "after"
    return "closed"


@dataclass(frozen=True)
class OrderFacts:
    symbol: str
    side: str  # buy | sell
    amount: Decimal
    price: Decimal | None  # the limit, else the price a market order would pay now
    limit: bool
    stock: bool
    asset: dict[str, object]  # Alpaca's asset record
    held: Decimal  # the position's available quantity now (negative: short)
    cash_available: Decimal  # buying power in the pair's quote (USD, or a USDT position)
    session: Session  # stocks: the market's session now (Alpaca's calendar)
    extended: bool  # stocks: this symbol may trade in the pre- and after-market
    last_equity: Decimal  # the equity at the previous close: the PDT rule's measure
    day_trades: int  # Alpaca's daytrade_count (last five sessions)
    other_side_today: bool  # this stock traded on the other side in today's session
    margin: bool = False  # a margin account with shorting enabled (multiplier > 1)
    ask: Decimal | None = None  # the latest ask: a short sale's value is 3% above it


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
    if not facts.stock or facts.session == "regular":
        return None
    if facts.session == "closed":
        return (
            f"the market for {facts.symbol} is closed (no regular or extended session now: "
            "nights 20:00-04:00 ET, weekends, holidays): no stock order is sent"
        )
    words = _SESSION_WORDS[facts.session]
    if not facts.extended:
        return (
            f"the market for {facts.symbol} is closed: it is the {words} session, and "
            "exchange.alpaca.extended_hours does not list this stock"
        )
    if not facts.limit:
        return f"{facts.symbol}: in the {words} session Alpaca takes limit orders only"
    if not _whole(facts):
        return f"{facts.symbol}: in the {words} session Alpaca takes whole shares only"
    return None


def _short(facts: OrderFacts) -> str | None:
    if facts.side != "sell" or facts.amount <= facts.held:
        return None
    name, short = facts.symbol, facts.amount - max(facts.held, Decimal(0))
    if not facts.stock:
        return f"{name}: Alpaca does not short crypto (sell {facts.amount}, hold {facts.held})"
    if not facts.margin:
        return (
            f"{name}: a short of {short} needs a margin account with shorting enabled; this "
            f"Alpaca account is a cash account (sell {facts.amount}, hold {facts.held})"
        )
    if not (facts.asset.get("shortable") and facts.asset.get("easy_to_borrow")):
        return f"{name} is not shortable at Alpaca (a short of {short} was asked)"
    return None if _whole(facts) else f"{name}: Alpaca shorts whole shares only"


def _pattern_day_trader(facts: OrderFacts) -> str | None:
    if (
        facts.stock
        and facts.other_side_today
        and facts.last_equity < PDT_EQUITY
        and facts.day_trades >= PDT_DAY_TRADES
    ):
        return (
            f"{facts.symbol}: a fourth day trade in five sessions with last_equity "
            f"{facts.last_equity} (the previous close's) under {PDT_EQUITY} "
            "(the pattern-day-trader rule)"
        )
    return None


def _buying_power(facts: OrderFacts) -> str | None:
    """A buy costs its amount at the limit (or the ask); a short sale its short part at the
    greater of the limit and 3% above the ask (Alpaca's docs); a sale of what is held costs
    nothing."""
    if facts.side == "buy":
        if facts.price is None:
            return None
        cost = facts.amount * facts.price
    else:
        short = facts.amount - max(facts.held, Decimal(0))
        if short <= 0 or facts.ask is None:
            return None
        cost = short * max(facts.price if facts.limit and facts.price else Decimal(0),
                           facts.ask * SHORT_MARKUP)  # fmt: skip
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
