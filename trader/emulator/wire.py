"""How Binance writes numbers and times: decimals as text with eight places, epoch ms."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from trader.domain import decimal_from_float


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def num(value: float | Decimal) -> str:
    decimal = value if isinstance(value, Decimal) else decimal_from_float(value)
    return f"{decimal:.8f}"
