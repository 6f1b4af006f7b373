"""What the Alpaca account the daemon's keys open means for the daemon: each of its flags as
Alpaca reports it (`/v2/account`, the fields of alpaca-py's `TradeAccount`), and what the
daemon will do about it. Pure: the account's JSON and the settings in, findings out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from trader.config.schema import Settings

Level = Literal["ok", "note", "degraded", "unusable"]
LEVELS: tuple[Level, ...] = ("ok", "note", "degraded", "unusable")  # from best to worst
PDT_EQUITY = Decimal(25_000)  # FINRA's minimum equity of a pattern day trader
PDT_DAY_TRADES = 3  # a fourth day trade within five sessions makes a pattern day trader


@dataclass(frozen=True)
class Finding:
    level: Level
    what: str  # the field and its value, as Alpaca reports it
    effect: str  # what the daemon will do about it

    @property
    def line(self) -> str:
        return f"  {self.level:<9}{self.what}: {self.effect}"


@dataclass(frozen=True)
class Symbols:
    """The configured symbols, by what Alpaca trades them as."""

    stocks: Sequence[str]
    coins: Sequence[str]


def _money(account: Mapping[str, Any], name: str) -> Decimal | None:
    try:
        return Decimal(str(account[name]))
    except (KeyError, InvalidOperation):
        return None


def _flag(account: Mapping[str, Any], name: str) -> bool:
    return account.get(name) is True or str(account.get(name)).lower() == "true"


def account_findings(
    account: Mapping[str, Any], settings: Settings, symbols: Symbols
) -> list[Finding]:
    """One finding per flag of `account` the daemon depends on, in the order they matter."""
    return [
        *_standing(account),
        _crypto(account, symbols),
        _shorting(account, settings, symbols),
        _multiplier(account),
        _equity(account),
        _day_trades(account, symbols),
        *_both_sides(settings),
    ]


def _standing(account: Mapping[str, Any]) -> list[Finding]:
    status = str(account.get("status"))
    refused = "Alpaca refuses every order, and the daemon records each as a rejection with "
    found = [
        Finding("ok", f"status {status}", "Alpaca accepts orders")
        if status == "ACTIVE"
        else Finding(
            "unusable",
            f"status {status}",
            refused + "Alpaca's reason: do not start it until the account is ACTIVE",
        )
    ]
    blocks = (
        ("account_blocked", "the account is blocked"),
        ("trading_blocked", "trading is blocked"),
        ("trade_suspended_by_user", "trading is suspended by the account's owner"),
    )
    for name, what in blocks:
        if _flag(account, name):
            found.append(Finding("unusable", f"{name} true", f"{what}: {refused}its reason"))
        else:
            found.append(Finding("ok", f"{name} false", "orders are not blocked"))
    return found


def _crypto(account: Mapping[str, Any], symbols: Symbols) -> Finding:
    status = str(account.get("crypto_status", "not reported"))
    what = f"crypto_status {status}"
    if not symbols.coins:
        return Finding("note", what, "no crypto pair among market.symbols")
    coins = ", ".join(symbols.coins)
    if "crypto_status" not in account:  # alpaca-py's recorded account has none
        return Finding("note", what, f"an order for {coins} Alpaca refuses is a rejection")
    if status == "ACTIVE":
        return Finding("ok", what, f"orders for {coins} are accepted")
    level: Level = "degraded" if symbols.stocks else "unusable"
    return Finding(level, what, f"Alpaca refuses every order for {coins}: each is a rejection")


def _shorting(account: Mapping[str, Any], settings: Settings, symbols: Symbols) -> Finding:
    allowed = _flag(account, "shorting_enabled")
    wanted = settings.strategy.allow_short
    what = f"shorting_enabled {str(allowed).lower()}"
    if allowed:
        how = (
            "the daemon may short stocks Alpaca lists as shortable and easy to borrow, in "
            "whole shares (crypto never)"
            if wanted
            else "strategy.allow_short = false: the daemon never shorts"
        )
        return Finding("ok", what, how)
    if wanted and symbols.stocks:
        return Finding(
            "degraded",
            what,
            "sells are limited to what is held, but strategy.allow_short = true: every short "
            "sale the strategy wants is refused by Alpaca and recorded as a rejection (set "
            "strategy.allow_short = false, or trade on a margin account)",
        )
    return Finding("ok", what, "sells are limited to what is held, as the daemon trades")


def _multiplier(account: Mapping[str, Any]) -> Finding:
    multiplier = str(account.get("multiplier"))
    what = f"multiplier {multiplier}"
    power = account.get("buying_power")
    if multiplier == "1":
        return Finding(
            "note", what, f"a cash account: no leverage, no shorting; buys spend cash ({power})"
        )
    if multiplier in {"2", "4"}:
        day = account.get("daytrading_buying_power")
        return Finding(
            "note",
            what,
            f"a margin account: buying power {power} ({multiplier}x; day-trading {day}); the "
            "daemon sizes positions from equity and its risk limits, not from the margin",
        )
    return Finding("note", what, "a multiplier Alpaca does not document: read as a margin account")


def _equity(account: Mapping[str, Any]) -> Finding:
    equity, last = _money(account, "equity"), _money(account, "last_equity")
    what = f"equity {account.get('equity')}, last_equity {account.get('last_equity')}"
    if equity is None or equity <= 0:
        return Finding("unusable", what, "no equity: there is nothing to trade with")
    if last is None or last <= 0:
        return Finding("note", what, "no previous close yet (a new account)")
    change = equity - last
    return Finding(
        "ok",
        what,
        f"{change:+} ({change / last:+.2%}) since the previous close; Alpaca judges the "
        "pattern-day-trader rule on last_equity",
    )


def _day_trades(account: Mapping[str, Any], symbols: Symbols) -> Finding:
    count = int(account.get("daytrade_count") or 0)
    flagged = _flag(account, "pattern_day_trader")
    last = _money(account, "last_equity") or Decimal(0)
    what = f"pattern_day_trader {str(flagged).lower()}, daytrade_count {count}"
    if not symbols.stocks:
        return Finding("ok", what, "the pattern-day-trader rule is for stocks: none is traded")
    if last >= PDT_EQUITY:
        return Finding(
            "ok", what, f"last_equity {last} is at least {PDT_EQUITY}: day trades are not limited"
        )
    if flagged:
        return Finding(
            "degraded",
            what,
            f"a pattern day trader with last_equity {last} under {PDT_EQUITY}: Alpaca refuses "
            "day trades (a stock bought today is not sold today) until the equity is restored",
        )
    if count >= PDT_DAY_TRADES:
        return Finding(
            "degraded",
            what,
            f"{count} day trades in five sessions with last_equity {last} under {PDT_EQUITY}: "
            "the daemon refuses a fourth before it leaves (Alpaca would refuse it, 40310100): "
            "a stock bought today is not sold today until the count falls",
        )
    return Finding(
        "ok",
        what,
        f"{PDT_DAY_TRADES - count} more day trade(s) in five sessions; the fourth would be "
        f"refused while last_equity {last} is under {PDT_EQUITY}",
    )


def _both_sides(settings: Settings) -> list[Finding]:
    """Alpaca refuses an order opposite a resting one (422, 42210000): maxdiff's pair."""
    names = {settings.strategy.name, *settings.strategy.per_symbol.values()}
    if "maxdiff" not in names:
        return []
    what = f"exchange.resting_both_sides {settings.exchange.resting_both_sides}"
    if settings.exchange.rests_both_sides:
        return [
            Finding(
                "degraded",
                what,
                "maxdiff rests a buy and a sell at once, and Alpaca refuses the second as a "
                "potential wash trade (42210000): set it to auto",
            )
        ]
    return [Finding("ok", what, "Alpaca forbids resting both sides: maxdiff rests one at a time")]


def worst(findings: Sequence[Finding]) -> Level:
    return max((f.level for f in findings), key=LEVELS.index, default="ok")
