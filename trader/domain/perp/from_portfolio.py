"""The engine's `Portfolio` (cash and signed FIFO lots) read as a USDⓈ-M `PerpAccount`.

The engine books a perp like spot: a buy of q at p takes q x p out of cash and adds a lot, so
cash + size x mark is the account's equity. Binance's wallet balance instead holds the margin
that was put up: wallet = cash + Σ size x entry, with entry = the lots' cost / size (the average
entry Binance keeps, positionRisk `entryPrice`). Then wallet + unrealised P&L on the mark
(size x (mark - entry)) = cash + size x mark: both views give the same equity, one model of the
money. FIFO and average entry split realised and unrealised P&L differently; the sum agrees.

An isolated position's wallet is its initial margin at entry, |cost| / leverage (what
`open_position` and `apply_trade` move in for each added fill), less the funding it has paid
(`isolated_funding`: Binance takes an isolated position's funding from its own margin).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact
from trader.domain.perp.account import PerpAccount
from trader.domain.perp.brackets import LeverageBrackets
from trader.domain.perp.position import MarginMode, PerpPosition, parse_margin_mode
from trader.domain.perp.rounding import quotient
from trader.domain.portfolio import Portfolio


def whole_leverage(max_leverage: float | Decimal | int) -> int:
    """`risk.max_leverage` as the whole number set on each symbol: rounded up (its doc says so)."""
    value = Decimal(str(max_leverage))
    if not value.is_finite() or value < 1:
        raise DomainError(f"leverage must be at least 1, got {max_leverage}")
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def perp_account(
    portfolio: Portfolio,
    brackets: Mapping[str, LeverageBrackets],
    *,
    leverage: int,
    margin_mode: MarginMode | str,
    isolated_funding: Mapping[str, Decimal] | None = None,
) -> PerpAccount:
    """The `PerpAccount` that holds the same money as `portfolio`: one position per open symbol
    at its lots' average entry, wallet = cash + Σ signed size x entry. Every open symbol needs
    its brackets (a DomainError names the one that has none)."""
    mode = parse_margin_mode(margin_mode)
    paid = isolated_funding or {}
    positions = []
    with exact():
        wallet = portfolio.cash + sum((p.cost for p in portfolio.positions.values()), ZERO)
    for symbol, lots in sorted(portfolio.positions.items()):
        if symbol not in brackets:
            raise DomainError(f"{symbol}: no leverage brackets for this symbol")
        if lots.amount == 0:
            continue
        entry = quotient(lots.cost, lots.amount)
        isolated_wallet = ZERO
        if mode is MarginMode.ISOLATED:
            margin = quotient(abs(lots.cost), Decimal(leverage))
            with exact():
                isolated_wallet = margin - paid.get(symbol, ZERO)
        positions.append(PerpPosition(symbol, lots.amount, entry, leverage, mode, isolated_wallet))
    return PerpAccount.with_positions(wallet, brackets, positions)
