"""What a liquidation books: the price each liquidated position closes at, the liquidation fee,
and what is left to the user. One model, used by the futures emulator
(`trader.emulator.futures_settle`) and by the paper engine (`trader.engine.perps`).

Binance's documented behaviour (USDⓈ-M "Liquidation Protocol", Binance's text as kept at
https://docs.traderwagon.com/faq/futures-trading-introduction/liquidation-protocol, and the
Insurance Fund FAQ https://www.binance.com/en/support/faq/360033525371):
- liquidation when the margin balance (collateral) falls to the maintenance margin on the mark;
- open orders are cancelled first (the callers do that);
- "a liquidation fee will be charged on the amount liquidated only";
- a user still margin deficient is closed at the bankruptcy price, "a portion of the remaining
  collateral (if any) will go to the Insurance Fund", and "if an account becomes bankrupt
  (negative wallet balance), the Insurance Fund will balance the account back to 0"; the fund
  collects "up to 0.5% fees from clients in liquidations that do not result in client
  bankruptcy".

Our modelling choices (Binance publishes no formula for them):
- no partial ("smart") liquidation: every position of the margin group (isolated: the one
  position; cross: every cross position) closes whole;
- the close price is the mark that triggered the check while the margin balance there is still
  at or above zero (the solvent side of the bankruptcy price); when the mark gapped through
  it (margin balance below zero), each position closes at its bankruptcy price (cross: the
  deficit shared by notional), and the insurance fund bears the loss beyond: the margin never
  ends below zero;
- the fee, `fee_rate` x the notional closed at the close price, is taken only out of what the
  group's margin has left above zero after the close, in the order the positions are given:
  an isolated liquidation never touches the cross wallet, and the fee never makes a wallet
  negative. What is left after the fee stays with the user (for an isolated position it goes
  back to the cross wallet, as any released isolated margin does).
- with a `step`, each price is rounded to it in the user's favour (a sell up, a buy down), so
  the rounding never carries the margin below zero either; the fee is rounded up to the step
  and then capped by what is left, rounded down to the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact, to_decimal
from trader.domain.perp.rounding import quotient

_ROUNDING = Context(prec=100)  # a step's rounding is meant: the exact context would trap it


@dataclass(frozen=True, slots=True)
class Liquidated:
    """One position of the margin group: its signed size and the mark the check valued it at."""

    symbol: str
    size: Decimal
    mark: Decimal

    def __post_init__(self) -> None:
        size = to_decimal(self.size, "position size")
        if size == 0:
            raise DomainError(f"{self.symbol}: a liquidation needs a non-zero position")
        mark = to_decimal(self.mark, "mark price")
        if mark <= 0:
            raise DomainError(f"{self.symbol}: the mark price must be positive, got {mark}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "mark", mark)


@dataclass(frozen=True, slots=True)
class LiquidationFill:
    """The closing trade of one position: `size` is the signed size closed (the position's),
    `price` the close price, `fee` the liquidation fee taken for it."""

    symbol: str
    size: Decimal
    price: Decimal
    fee: Decimal


@dataclass(frozen=True, slots=True)
class LiquidationOutcome:
    """The fills, what the margin group has left for the user after the fee (never negative),
    and the loss beyond the bankruptcy price the insurance fund bears (never negative)."""

    fills: tuple[LiquidationFill, ...]
    left: Decimal
    insurance_covers: Decimal

    @property
    def fees(self) -> Decimal:
        with exact():
            return sum((f.fee for f in self.fills), ZERO)


def _rounded(price: Decimal, size: Decimal, step: Decimal | None) -> Decimal:
    """`price` to `step` in the user's favour: a long sells up, a short buys down."""
    if step is None:
        return price
    rounded = price.quantize(step, ROUND_CEILING if size > 0 else ROUND_FLOOR, _ROUNDING)
    return max(rounded, ZERO)


def liquidation_fills(
    positions: Sequence[Liquidated],
    margin_balance: Decimal,
    fee_rate: Decimal,
    *,
    step: Decimal | None = None,
) -> LiquidationOutcome:
    """Close `positions` (one margin group) whose margin balance at their marks is
    `margin_balance` (isolated: the position's wallet + unrealised P&L; cross: the cross wallet
    + every cross position's unrealised P&L). See the module for the model."""
    if not positions:
        raise DomainError("a liquidation needs at least one position")
    balance = to_decimal(margin_balance, "margin balance")
    rate = to_decimal(fee_rate, "liquidation fee rate")
    if rate < 0:
        raise DomainError(f"the liquidation fee rate must not be negative, got {rate}")
    if step is not None and step <= 0:
        raise DomainError(f"the price step must be positive, got {step}")
    with exact():
        total = sum((abs(p.size) * p.mark for p in positions), ZERO)
        prices = []
        for p in positions:
            if balance >= 0:
                price = p.mark
            else:  # a gap through the bankruptcy price: the deficit shared by notional
                moved = quotient(balance * abs(p.size) * p.mark, total * p.size)
                price = max(p.mark - moved, ZERO)
            prices.append(_rounded(price, p.size, step))
        # The margin after the closes: the balance at the marks plus each close's move off it.
        after = balance + sum(
            (p.size * (price - p.mark) for p, price in zip(positions, prices, strict=True)), ZERO
        )
        insurance = max(-after, ZERO)
        left = max(after, ZERO)
        fills = []
        for p, price in zip(positions, prices, strict=True):
            fee = rate * abs(p.size) * price
            cap = left
            if step is not None:  # whole steps: the dust below one stays with the user
                fee = fee.quantize(step, ROUND_CEILING, _ROUNDING)
                cap = left.quantize(step, ROUND_FLOOR, _ROUNDING)
            fee = min(fee, cap)
            left -= fee
            fills.append(LiquidationFill(p.symbol, p.size, price, fee))
    return LiquidationOutcome(tuple(fills), left, insurance)
