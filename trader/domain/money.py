"""Exact decimal arithmetic for cash, positions and fees.

Ledger amounts are `Decimal`s computed under a context that traps inexact results: a sum or
product that would need rounding raises instead of drifting. Floats never enter the ledger;
adapters convert them at the boundary with `decimal_from_float`, which keeps the shortest
decimal that prints as the float (what the exchange sent as text).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from decimal import (
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    localcontext,
)

from trader.domain.errors import DomainError

# 100 significant digits: the product of two 28-digit amounts still fits without rounding.
_EXACT = Context(prec=100, traps=[Inexact, InvalidOperation, DivisionByZero, Overflow])

ZERO = Decimal(0)


def exact() -> AbstractContextManager[Context]:
    """Run ledger arithmetic under a context where any rounding raises `decimal.Inexact`."""
    return localcontext(_EXACT)


def to_decimal(value: Decimal | int | str, name: str) -> Decimal:
    """A finite Decimal from a Decimal, int or decimal string; floats are refused."""
    if isinstance(value, bool | float):
        raise DomainError(
            f"{name} must be a Decimal, int or decimal string, not {type(value).__name__} "
            "(floats drift; convert at the boundary with decimal_from_float)"
        )
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, str):
        try:
            result = Decimal(value.strip())
        except InvalidOperation:
            raise DomainError(f"{name}: {value!r} is not a decimal number") from None
    else:
        raise DomainError(f"{name} must be a Decimal, int or decimal string")
    if not result.is_finite():
        raise DomainError(f"{name} must be finite, got {result}")
    return result


def decimal_from_float(value: float, name: str = "value") -> Decimal:
    """The shortest decimal that round-trips to `value` (e.g. 0.1 -> Decimal('0.1'))."""
    if not math.isfinite(value):
        raise DomainError(f"{name} must be finite, got {value}")
    return Decimal(repr(float(value)))


def positive_decimal(value: Decimal | int | str, name: str) -> Decimal:
    result = to_decimal(value, name)
    if result <= 0:
        raise DomainError(f"{name} must be positive, got {result}")
    return result
