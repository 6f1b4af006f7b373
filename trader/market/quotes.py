"""Quotes that were not seen on an exchange, each labelled for what it is.

- Replay and backtest: a stated spread model around the last close, labelled MODELLED.
- ADD_LATEST=0: bid = ask = last close, labelled SYNTHETIC, whose spread counts as unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from trader.domain import Bar, QuoteSource, decimal_from_float, exact
from trader.market.hygiene import RawQuote

HALF_BPS = Decimal(20_000)  # a half-spread in bps is this share of the price

SYNTHETIC_NOTICE = "Populating synthetic bid/ask (ADD_LATEST=False)"


class SpreadModel(Protocol):
    @property
    def name(self) -> str: ...

    def spread_bps(self, recent: Sequence[Bar]) -> float:
        """Full bid-ask spread in basis points of the mid, from the most recent bars."""
        ...


@dataclass(frozen=True)
class FixedSpread:
    bps: float
    name: str = "fixed"

    def spread_bps(self, recent: Sequence[Bar]) -> float:
        return self.bps


@dataclass(frozen=True)
class HighLowSpread:
    """Corwin & Schultz (2012): the spread implied by the high/low of two consecutive bars,
    never below `floor_bps` (the estimator is noisy and often zero)."""

    floor_bps: float
    name: str = "high_low"

    def spread_bps(self, recent: Sequence[Bar]) -> float:
        if len(recent) < 2:
            return self.floor_bps
        first, second = recent[-2], recent[-1]
        beta = math.log(first.high / first.low) ** 2 + math.log(second.high / second.low) ** 2
        gamma = math.log(max(first.high, second.high) / min(first.low, second.low)) ** 2
        k = 3 - 2 * math.sqrt(2)
        alpha = (math.sqrt(2 * beta) - math.sqrt(beta)) / k - math.sqrt(gamma / k)
        spread = 2 * (math.exp(alpha) - 1) / (1 + math.exp(alpha))
        return max(spread * 10_000, self.floor_bps)


def modelled_quote(recent: Sequence[Bar], model: SpreadModel) -> RawQuote:
    """A quote around the last close, stamped at that bar's close."""
    last = recent[-1]
    close = decimal_from_float(last.close)
    half = decimal_from_float(model.spread_bps(recent)) / HALF_BPS
    with exact():
        bid, ask = close * (1 - half), close * (1 + half)
    return RawQuote(bid, ask, last.end, last.end, source=QuoteSource.MODELLED)


def synthetic_quote(last: Bar) -> RawQuote:
    close = decimal_from_float(last.close)
    return RawQuote(close, close, last.end, last.end, source=QuoteSource.SYNTHETIC)
