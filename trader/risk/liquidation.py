"""Liquidation as a risk of a perpetual account: the buffer rule and the leverage check.

The buffer rule. For each position, the distance from the mark to its liquidation price
(Binance's formula for one-way mode, isolated and cross, with the symbol's leverage brackets:
`trader.domain.perp`) as a share of the mark. Below `risk.liquidation_buffer` the rule wants a
reduce-only market order of the least amount, in whole amount steps and never more than the
position, that brings the distance back to the buffer (`reduction_for_buffer`); 0 turns it off.
It runs every tick before the strategies' orders, and a symbol it reduces takes no strategy
order that tick (a strategy that wants to add is overridden). Each position is judged as the
account stands; reducing one cross position at its mark keeps the margin balance (unrealised
P&L becomes realised) and lowers the maintenance margin, so it never brings another cross
position nearer its liquidation price: the reductions need no order among themselves.

A reduce-only order is exempt from the minimum notional (Binance USDⓈ-M answers -4164 "Order's
notional must be no smaller than 5 (unless you choose reduce only)", as quoted from the venue in
github.com/conor19w/binance-futures-trading-bot/issues/52), so a small reduction still goes.

The leverage check: an order that would take the positions' notional at the mark above
`risk.max_leverage` x the margin balance (wallet + unrealised P&L) is refused with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from trader.domain import DomainError, Side
from trader.domain.money import exact
from trader.domain.perp import (
    LeverageBrackets,
    MarginState,
    PerpAccount,
    distance_to_liquidation,
    holds_buffer,
    liquidation_price,
    reduction_for_buffer,
)
from trader.domain.perp.rounding import quotient

BUFFER_RULE = "liquidation_buffer"  # the orders' leg and the log's rule: a bounded label
LEVERAGE_RULE = "leverage"


@dataclass(frozen=True)
class BufferReduction:
    """A reduce-only market order the buffer rule wants: `amount` of `symbol` on `side`."""

    symbol: str
    side: Side  # SELL reduces a long, BUY a short
    amount: Decimal
    position: Decimal  # the signed size before it
    mark: Decimal
    liquidation_price: Decimal | None  # None: Binance's "--" (see `distance`)
    distance: Decimal | None  # share of the mark; negative: past it; None: no price
    buffer: Decimal

    @property
    def closes(self) -> bool:
        return self.amount == abs(self.position)

    @property
    def reason(self) -> str:
        if self.distance is None:
            where = "the account is below maintenance margin at any price"
        else:
            where = (
                f"liquidation price {self.liquidation_price:.8g} is {self.distance:.2%} of the "
                f"mark {self.mark:.8g} away"
            )
        what = "close it" if self.closes else f"reduce by {self.amount} of {abs(self.position)}"
        return f"{where}, inside the buffer {self.buffer:.2%}: {what} (reduce-only)"


def _holds_after_closing(
    state: MarginState,
    brackets: LeverageBrackets,
    *,
    mark: Decimal,
    buffer: Decimal,
    closed: Decimal,
    cost: Decimal,
    isolated: bool,
) -> bool:
    """Whether the buffer holds after closing `closed` at the mark less `cost` (a share of the
    notional: the taker fee, half the spread, slippage). Cross: the realised P&L and the cost
    stay in the wallet that backs the position. Isolated: the wallet is released pro rata and
    the P&L and fee go to the cross wallet (`apply_trade`), so the cost does not matter."""
    with exact():
        remaining = state.size - state.side * closed
    if remaining == 0:
        return True
    if isolated:
        wallet = quotient(state.wallet_balance * abs(remaining), state.quantity)
    else:
        with exact():
            realised = state.side * closed * (mark - state.entry_price)
            wallet = state.wallet_balance + realised - closed * mark * cost
    reduced = MarginState(
        remaining, state.entry_price, wallet, state.other_maintenance, state.other_unrealised
    )
    return holds_buffer(reduced, brackets, mark, buffer)


def _covering_costs(
    state: MarginState,
    brackets: LeverageBrackets,
    *,
    mark: Decimal,
    buffer: Decimal,
    step: Decimal,
    cost: Decimal,
    isolated: bool,
    least: Decimal,
) -> Decimal:
    """The least whole-step amount from `least` (the reduction with no costs, a lower bound)
    that holds the buffer once the fill's costs are paid; the position at most. Closing more
    adds mark x buffer per unit to the surplus at the buffer price and costs mark x cost, so
    while the cost is below the buffer the answer is found by bisection over whole steps."""
    quantity = state.quantity

    def held(closed: Decimal) -> bool:
        return _holds_after_closing(
            state, brackets, mark=mark, buffer=buffer, closed=closed, cost=cost, isolated=isolated
        )

    if cost == 0 or least == quantity or held(least):
        return least
    low = int(quotient(least, step).to_integral_value(ROUND_FLOOR))
    high = int(quotient(quantity, step).to_integral_value(ROUND_CEILING))
    while high - low > 1:  # fails at `low`, holds at `high` (the whole position)
        middle = (low + high) // 2
        with exact():
            closed = min(middle * step, quantity)
        if held(closed):
            high = middle
        else:
            low = middle
    with exact():
        return min(high * step, quantity)


def buffer_reductions(
    account: PerpAccount,
    marks: Mapping[str, Decimal],
    *,
    buffer: Decimal,
    steps: Mapping[str, Decimal],
    costs: Mapping[str, Decimal] | None = None,
) -> list[BufferReduction]:
    """The reductions the buffer rule wants now, by symbol order; none when `buffer` is 0.
    `steps`: each symbol's amount step; `costs`: what closing costs as a share of the notional
    (taker fee, half the spread, slippage; none: 0), so that the buffer holds after the fill
    and not only at the mark. A position without a mark or a step raises a DomainError naming
    it (the rule never guesses a price)."""
    buffer = Decimal(buffer)
    if buffer < 0:
        raise DomainError(f"the liquidation buffer must not be negative, got {buffer}")
    if buffer == 0:
        return []
    wanted = []
    for symbol, position in sorted(account.positions.items()):
        if symbol not in marks:
            raise DomainError(f"{symbol}: no mark price for the liquidation buffer rule")
        if symbol not in steps:
            raise DomainError(f"{symbol}: no amount step for the liquidation buffer rule")
        mark = marks[symbol]
        state = account.margin_state(symbol, marks)
        brackets = account.brackets[symbol]
        if holds_buffer(state, brackets, mark, buffer):
            continue
        amount = reduction_for_buffer(
            state, brackets, mark=mark, buffer=buffer, step=steps[symbol],
            isolated=position.isolated,
        )  # fmt: skip
        amount = _covering_costs(
            state, brackets, mark=mark, buffer=buffer, step=steps[symbol],
            cost=(costs or {}).get(symbol, Decimal(0)), isolated=position.isolated, least=amount,
        )  # fmt: skip
        if amount == 0:
            continue
        price = liquidation_price(state, brackets)
        wanted.append(
            BufferReduction(
                symbol=symbol,
                side=Side.SELL if position.size > 0 else Side.BUY,
                amount=amount,
                position=position.size,
                mark=mark,
                liquidation_price=price,
                distance=distance_to_liquidation(position.side, mark, price),
                buffer=buffer,
            )
        )
    return wanted


@dataclass(frozen=True)
class PerpExposure:
    """What the leverage check reads of a perpetual account besides the order's own symbol:
    the other positions' notional at their marks, and the margin balance."""

    others_notional: Decimal  # sum of |size| x mark of every other position
    margin_balance: Decimal  # wallet + unrealised P&L on the marks

    @classmethod
    def of(cls, account: PerpAccount, marks: Mapping[str, Decimal], symbol: str) -> PerpExposure:
        with exact():
            others = sum(
                (abs(p.notional(marks[s])) for s, p in account.positions.items() if s != symbol),
                Decimal(0),
            )
        return cls(others, account.margin_balance(marks))


def leverage_refusal(
    *,
    position: Decimal,
    order: Decimal,
    mark: Decimal,
    exposure: PerpExposure,
    max_leverage: Decimal,
) -> str | None:
    """Why an order of signed `order` on a symbol holding signed `position` would take the
    positions' notional at the mark past `max_leverage` x the margin balance; None if it
    does not."""
    with exact():
        after = abs(position + order) * mark + exposure.others_notional
        allowed = max_leverage * exposure.margin_balance
    if exposure.margin_balance <= 0:
        return f"no margin balance ({exposure.margin_balance:.2f}) to back a position"
    if after > allowed:
        return (
            f"positions' notional {after:.2f} at the mark > max_leverage {max_leverage} x "
            f"margin balance {exposure.margin_balance:.2f} = {allowed:.2f}"
        )
    return None
