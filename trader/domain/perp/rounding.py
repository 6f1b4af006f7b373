"""Division for the perpetual's money: the one place a quotient is rounded.

Sums and products stay exact (`trader.domain.money.exact`); a liquidation price, a weighted
entry price or an initial margin at 3x leverage is a quotient that has no finite decimal, so it
is rounded here, to 50 significant digits (half-even): far below any tick, and the property tests
hold the results to that.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)

from trader.domain.errors import DomainError

QUOTIENT_DIGITS = 50
_ROUNDED = Context(
    prec=QUOTIENT_DIGITS,
    rounding=ROUND_HALF_EVEN,
    traps=[InvalidOperation, DivisionByZero, Overflow],
)


def rounded() -> AbstractContextManager[Context]:
    """Arithmetic on quotients (a sum of initial margins, a balance less them): 50 digits,
    rounded, where the ledger's `exact()` would raise."""
    return localcontext(_ROUNDED)


def quotient(numerator: Decimal, denominator: Decimal) -> Decimal:
    """`numerator / denominator` to 50 significant digits; a zero denominator is a DomainError."""
    if denominator == 0:
        raise DomainError("division by zero in a margin computation")
    return _ROUNDED.divide(numerator, denominator)
