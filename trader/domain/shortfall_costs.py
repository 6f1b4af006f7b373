"""The costs a run paid, measured from its fills, in the terms a backtest's cost model takes:
what `trader backtest --costs-from` reads back (`MeasuredCosts.as_dict` is its JSON).

Per fill, against the quote its decision priced with (mid m, the touch t: the ask for a buy,
the bid for a sell), in basis points, each fill counting once:

    spread_bps   = (ask - bid) / m            the quoted spread (what market.replay_spread_bps
                                              models); a synthetic quote's is unknown: counted
                                              in `unknown_spread`, left out
    slippage_bps = side * (price - t) / t     beyond the touch, the move until the fill
                                              included (what broker.slippage_bps models: a
                                              backtest fills at the decision's quote)
    delay_bps    = side * (m_f - m) / m       the mid's move from the decision to the fill,
                                              where the mid at the fill was measured

grouped by side and order type. Also: the fill ratio of limit orders (amount filled over amount
ordered), and the fee rate paid by liquidity (fees over notional, both in the cash currency at
the fill price). These are statistics, not ledger money: floats.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal, localcontext
from types import MappingProxyType

from trader.domain.fill import Liquidity
from trader.domain.market import QuoteSource
from trader.domain.money import ZERO
from trader.domain.order import OrderType
from trader.domain.shortfall_records import Run
from trader.domain.side import Side

BPS = Decimal(10_000)
PERCENTILES = (5, 25, 50, 75, 95)
_STATISTICS = Context(prec=28)  # ratios for statistics: rounding is fine here


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles (linear between ranks) of some fills' figures."""

    count: int
    mean: float
    percentiles: Mapping[int, float]

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        ordered = sorted(values)
        return cls(
            len(ordered),
            math.fsum(ordered) / len(ordered),
            MappingProxyType({p: _percentile(ordered, p) for p in PERCENTILES}),
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "count": self.count,
            "mean": self.mean,
            **{f"p{p}": value for p, value in self.percentiles.items()},
        }


def _percentile(ordered: Sequence[float], percent: int) -> float:
    rank = (len(ordered) - 1) * percent / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class CostGroup:
    """The fills of one side and order type. A distribution is None where no fill had it."""

    side: Side
    type: OrderType
    fills: int
    spread_bps: Distribution | None
    slippage_bps: Distribution | None
    delay_bps: Distribution | None
    unknown_spread: int  # fills priced with a synthetic quote

    def as_dict(self) -> dict[str, object]:
        return {
            "side": str(self.side),
            "type": str(self.type),
            "fills": self.fills,
            "unknown_spread": self.unknown_spread,
            **{
                name: None if dist is None else dist.as_dict()
                for name, dist in (
                    ("spread_bps", self.spread_bps),
                    ("slippage_bps", self.slippage_bps),
                    ("delay_bps", self.delay_bps),
                )
            },
        }


@dataclass(frozen=True)
class MeasuredCosts:
    groups: tuple[CostGroup, ...]  # by side, then order type; only those with fills
    limit_orders: int
    limit_orders_filled: int  # with any fill
    limit_fill_ratio: float | None  # amount filled over amount ordered; None: no limit orders
    fee_bps: Mapping[Liquidity, float]  # by liquidity, where there were fills

    def as_dict(self) -> dict[str, object]:
        return {
            "groups": [group.as_dict() for group in self.groups],
            "limit_orders": self.limit_orders,
            "limit_orders_filled": self.limit_orders_filled,
            "limit_fill_ratio": self.limit_fill_ratio,
            "fee_bps": {str(liquidity): bps for liquidity, bps in self.fee_bps.items()},
        }


@dataclass
class _Figures:
    fills: int = 0
    unknown_spread: int = 0
    spread: list[float] = field(default_factory=list)
    slippage: list[float] = field(default_factory=list)
    delay: list[float] = field(default_factory=list)


def measure_costs(run: Run) -> MeasuredCosts:
    """What the run's fills paid (the module's definitions)."""
    figures: dict[tuple[Side, OrderType], _Figures] = defaultdict(_Figures)
    fees: dict[Liquidity, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])  # fees, notional
    ordered = filled = ZERO
    limit_orders = limit_filled = 0
    with localcontext(_STATISTICS):
        for record in run.orders:
            order, quote = record.order, record.quote
            group = figures[order.side, order.type]
            touch = quote.ask if order.side is Side.BUY else quote.bid
            for fill in record.fills:
                group.fills += 1
                if quote.source is QuoteSource.SYNTHETIC:
                    group.unknown_spread += 1
                else:
                    group.spread.append(float((quote.ask - quote.bid) / quote.mid * BPS))
                group.slippage.append(float(order.side.sign * (fill.price - touch) / touch * BPS))
                mid_at_fill = record.mids_at_fill.get(fill.fill_id)
                if mid_at_fill is not None:
                    move = order.side.sign * (mid_at_fill - quote.mid)
                    group.delay.append(float(move / quote.mid * BPS))
                paid = fees[fill.liquidity]
                paid[0] += fill.quote_fee
                paid[1] += fill.notional
            if order.type is OrderType.LIMIT:
                limit_orders += 1
                limit_filled += bool(record.fills)
                ordered += order.amount
                filled += record.filled
        fee_bps = {
            liquidity: float(paid / notional * BPS)
            for liquidity, (paid, notional) in sorted(fees.items())
            if notional
        }
        ratio = float(filled / ordered) if ordered else None
    return MeasuredCosts(
        tuple(_groups(figures)),
        limit_orders,
        limit_filled,
        ratio,
        MappingProxyType(fee_bps),
    )


def _groups(figures: Mapping[tuple[Side, OrderType], _Figures]) -> list[CostGroup]:
    return [
        CostGroup(
            side,
            type_,
            found.fills,
            Distribution.of(found.spread),
            Distribution.of(found.slippage),
            Distribution.of(found.delay),
            found.unknown_spread,
        )
        for (side, type_), found in sorted(figures.items())
        if found.fills
    ]
