"""Unified market symbols as ccxt spells them: BASE/QUOTE, or BASE/QUOTE:SETTLE for derivatives."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from trader.domain.errors import DomainError

_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_SYMBOL = re.compile(rf"^{_PART}/{_PART}(:{_PART})?$")


def check_symbol(symbol: str) -> str:
    if not isinstance(symbol, str) or not _unified(symbol):
        raise DomainError(f"symbol {symbol!r} is not a unified symbol like 'SOL/USDT' (BASE/QUOTE)")
    return symbol


@lru_cache(maxsize=4096)  # a run checks its few symbols in every bar, quote, signal and order
def _unified(symbol: str) -> bool:
    return _SYMBOL.match(symbol) is not None


def quote_currency(symbol: str) -> str:
    """The currency prices of `symbol` are in: 'USDT' for 'SOL/USDT' and 'BTC/USDT:USDT'."""
    return check_symbol(symbol).split("/", 1)[1].split(":", 1)[0]


def base_currency(symbol: str) -> str:
    """The asset `symbol` trades: 'SOL' for 'SOL/USDT'."""
    return check_symbol(symbol).split("/", 1)[0]


def account_currency(symbols: Sequence[str]) -> str:
    """The one currency an account trading `symbols` holds: their common quote currency.
    Symbols quoted in different currencies cannot share an account (there is no conversion)."""
    quotes = sorted({quote_currency(symbol) for symbol in symbols})
    if len(quotes) != 1:
        raise DomainError(
            f"the symbols {', '.join(symbols)} are quoted in {' and '.join(quotes)}: one "
            "account holds one currency and no conversion is configured; trade each "
            "currency's symbols in a run of their own"
        )
    return quotes[0]
