"""What every strategy sees, and what it answers: a signal with its reason, and a plan.

A strategy cannot tell backtest from paper from live: it gets the same context in each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import NamedTuple, Protocol, runtime_checkable

from trader.domain import Bar, Direction, Forecast, Quote, Signal


@dataclass(frozen=True)
class Costs:
    """Fees per side, in basis points of the notional."""

    taker_fee_bps: float
    maker_fee_bps: float


@dataclass(frozen=True)
class DecisionContext:
    symbol: str
    at: datetime  # the tick: every input closed at or before it
    bars: Sequence[Bar]
    quote: Quote
    forecast: Forecast  # the primary model's
    forecasts: Mapping[str, Forecast]  # every model's, by model name (consensus)
    position: Decimal  # signed amount held now
    costs: Costs
    allow_short: bool
    # When the forecast's horizon ends in the market's time: the close of its last bar, so a
    # horizon over a weekend or a night between sessions counts trading bars, not hours.
    horizon_end: datetime | None = None

    def valid_until(self) -> datetime:
        """Until when an order for the forecast's horizon stays valid."""
        if self.horizon_end is not None:
            return self.horizon_end
        steps = self.forecast.steps
        return self.at + timedelta(seconds=self.forecast.timeframe.seconds * steps)

    @property
    def last_close(self) -> float:
        return self.bars[-1].close

    def median_return(self, forecast: Forecast | None = None) -> float:
        """Median forecast close at the horizon, as a return on the last close."""
        return median_return(forecast or self.forecast, self.last_close)

    @property
    def outlook(self) -> Outlook:
        return Outlook(self.forecast, self.last_close, self.quote, self.costs, self.allow_short)


def median_return(forecast: Forecast, last_close: float) -> float:
    return forecast.quantile("close", 0.5) / last_close - 1.0


class Outlook(NamedTuple):
    """What a strategy that trades at market from the primary forecast alone reads of a tick
    (`Outlined`): a backtest's quiet stretches (`trader.backtest.stretch`) hand it over
    without making a `DecisionContext` for every tick."""

    forecast: Forecast
    last_close: float
    quote: Quote
    costs: Costs
    allow_short: bool

    def median_return(self) -> float:
        return median_return(self.forecast, self.last_close)


class Outline(NamedTuple):
    """An at-market decision before it is dated and addressed: the direction to hold, why,
    the inputs, and the expected edge (None when no entry is intended)."""

    direction: Direction
    reason: str
    inputs: Mapping[str, float | str]
    edge_bps: float | None


@dataclass(frozen=True)
class AtMarket:
    """Hold `direction` now, crossing the spread if the position must change."""

    direction: Direction


@dataclass(frozen=True)
class RestingLimits:
    """Rest a buy at `buy_price` and/or a sell at `sell_price` until `expires_at`; they fill
    only if the market trades through them."""

    buy_price: Decimal | None
    sell_price: Decimal | None
    expires_at: datetime


Plan = AtMarket | RestingLimits


@dataclass(frozen=True)
class Decision:
    signal: Signal
    plan: Plan
    # The expected gross move in the trade's direction (bps); the risk engine requires it to
    # clear fees + spread + its minimum before exposure grows. None: no entry intended.
    edge_bps: float | None = None


class Strategy(Protocol):
    name: str

    def decide(self, ctx: DecisionContext) -> Decision: ...


@runtime_checkable
class Outlined(Strategy, Protocol):
    """A strategy whose decision is `outlined(self.name, ctx, self.outline(ctx.outlook))`: at
    market, from the outlook alone."""

    def outline(self, outlook: Outlook) -> Outline: ...


def outlined(strategy: str, ctx: DecisionContext, outline: Outline) -> Decision:
    """The decision `outline` describes, for `ctx`'s symbol and tick."""
    direction = outline.direction
    signal = Signal(strategy, ctx.symbol, ctx.at, direction, outline.reason, outline.inputs)
    return Decision(signal, AtMarket(direction), outline.edge_bps)


def stand_aside(
    strategy: str, ctx: DecisionContext, reason: str, inputs: Mapping[str, float | str]
) -> Decision:
    """No position wanted: "no trade, because ..."; a held position is closed at market."""
    return outlined(strategy, ctx, Outline(Direction.FLAT, reason, inputs, None))
