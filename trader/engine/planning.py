"""From a decision to orders: what to cancel, what to send, and how big.

At market: hold the target (a share of equity, capped by the risk limits) in the decided
direction. A position already held in that direction is topped up to its target but never
trimmed, so equity moving does not churn it; flat means close it. Resting limits replace the
symbol's resting orders every tick. Every order is at most `max_order_notional`: a larger
move takes several ticks. Live, targets are sized from `broker.live_capital_fraction` of the
equity (or its ramp's step that day): the rest of the account is never put at risk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cached_property

from trader.config.schema import Settings
from trader.config.trading_settings import RiskSettings, StrategySettings
from trader.domain import (
    ZERO,
    Direction,
    Instrument,
    Order,
    OrderType,
    Quote,
    Side,
)
from trader.domain.capital_ramp import LiveCapital, parse_ramp
from trader.risk.sizing import order_size, target_amount
from trader.strategy.base import AtMarket, Decision, RestingLimits


@dataclass(frozen=True)
class Book:
    """What the planner knows of the account, for one symbol."""

    position: Decimal
    equity: Decimal
    others_exposure: Decimal
    resting: Sequence[Order]


@dataclass(frozen=True)
class Intent:
    """An order the plan wants, as the risk checks judge it. The `Order` itself (PENDING,
    with its deterministic id) is made when first asked for: for one the checks admit, or
    one a restart must look for, never for the many a backtest's checks refuse."""

    strategy: str
    symbol: str
    side: Side
    type: OrderType
    amount: Decimal
    limit_price: Decimal | None
    tick_time: datetime
    leg: str
    price: Decimal  # where it should trade: its limit, or the touch
    edge_bps: float | None
    expires_at: datetime | None = None

    @cached_property
    def order(self) -> Order:
        return Order.create(
            strategy=self.strategy, symbol=self.symbol, side=self.side, type=self.type,
            amount=self.amount, limit_price=self.limit_price, tick_time=self.tick_time,
            leg=self.leg, expires_at=self.expires_at,
        )  # fmt: skip


@dataclass(frozen=True)
class OrderPlan:
    cancels: tuple[Order, ...]
    intents: tuple[Intent, ...]


def live_capital(settings: Settings) -> LiveCapital | None:
    """The share of equity live sizing may use (None: paper and backtests size from all)."""
    broker = settings.broker
    if broker.mode != "live":
        return None
    fraction = Decimal(repr(broker.live_capital_fraction))
    return LiveCapital(fraction, parse_ramp(broker.live_ramp), settings.promotion.at)


@dataclass(frozen=True)
class Planner:
    strategy: StrategySettings
    risk: RiskSettings
    capital: LiveCapital | None = None  # live: the share of equity sizing may use

    @classmethod
    def of(cls, settings: Settings) -> Planner:
        return cls(settings.strategy, settings.risk, live_capital(settings))

    def plan(
        self,
        decision: Decision,
        *,
        at: datetime,
        quote: Quote,
        instrument: Instrument,
        book: Book,
    ) -> OrderPlan:
        if isinstance(decision.plan, AtMarket):
            intents = self._at_market(decision, decision.plan, at, quote, instrument, book)
        else:
            intents = self._resting(decision, decision.plan, at, instrument, book)
        return OrderPlan(tuple(book.resting), tuple(intents))

    def _target(
        self, direction: Direction, price: Decimal, instrument: Instrument, book: Book,
        at: datetime,
    ) -> Decimal:  # fmt: skip
        equity = book.equity
        if self.capital is not None:
            equity = equity * self.capital.share(at)
        return target_amount(
            direction,
            equity=equity,
            price=price,
            instrument=instrument,
            fraction=self.strategy.position_fraction,
            max_position_notional=self.risk.max_position_notional,
            room=self.risk.max_total_exposure - book.others_exposure,
        )

    def _size(self, amount: Decimal, price: Decimal, instrument: Instrument) -> Decimal:
        return order_size(
            amount,
            price=price,
            instrument=instrument,
            max_order_notional=self.risk.max_order_notional,
        )

    def _at_market(
        self,
        decision: Decision,
        plan: AtMarket,
        at: datetime,
        quote: Quote,
        instrument: Instrument,
        book: Book,
    ) -> list[Intent]:
        signal = decision.signal
        intent = self.market_intent(
            signal.strategy, signal.symbol, plan.direction, decision.edge_bps, at=at,
            quote=quote, instrument=instrument, book=book,
        )  # fmt: skip
        return [intent] if intent is not None else []

    def market_intent(
        self,
        strategy: str,
        symbol: str,
        direction: Direction,
        edge_bps: float | None,
        *,
        at: datetime,
        quote: Quote,
        instrument: Instrument,
        book: Book,
    ) -> Intent | None:
        """The market order that holds `direction` (None: none is needed, or none tradable)."""
        held = book.position
        target = self._target(direction, quote.mid, instrument, book, at)
        same_way = held != 0 and target != 0 and (held > 0) == (target > 0)
        delta = (target - held) if not same_way or abs(target) > abs(held) else ZERO
        if delta == 0:
            return None
        side = Side.BUY if delta > 0 else Side.SELL
        touch = quote.ask if side is Side.BUY else quote.bid
        amount = self._size(abs(delta), touch, instrument)
        if amount == 0:
            return None
        return Intent(
            strategy, symbol, side, OrderType.MARKET, amount, None, at, "market", touch, edge_bps
        )

    def _resting(
        self,
        decision: Decision,
        plan: RestingLimits,
        at: datetime,
        instrument: Instrument,
        book: Book,
    ) -> list[Intent]:
        held = book.position
        intents = []
        for side, limit in ((Side.BUY, plan.buy_price), (Side.SELL, plan.sell_price)):
            if limit is None:
                continue
            price = instrument.round_price(limit, side)
            if price <= 0:
                continue
            closing = (side is Side.BUY and held < 0) or (side is Side.SELL and held > 0)
            if closing:
                wanted = abs(held)
            else:
                direction = Direction.LONG if side is Side.BUY else Direction.SHORT
                wanted = abs(self._target(direction, price, instrument, book, at)) - abs(held)
            amount = self._size(wanted, price, instrument) if wanted > 0 else ZERO
            if amount == 0:
                continue
            signal = decision.signal
            intents.append(
                Intent(
                    signal.strategy, signal.symbol, side, OrderType.LIMIT, amount, price, at,
                    side.value, price, None if closing else decision.edge_bps, plan.expires_at,
                )
            )  # fmt: skip
        return intents
