"""What a shortfall attribution (`trader.domain.shortfall`) compares: the modelled run (the
backtest's replay of a period) and the actual run (what the daemon's ledger says it did), each
as its orders with the quote each decision priced with and the fills each got, plus what
happened to the actual run's ticks and what the risk checks did in either run.

Orders of the two runs are matched by client order id: the id is derived from the decision
(strategy, symbol, tick, leg), so the same decision has the same id in both runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType

from trader.domain.errors import DomainError
from trader.domain.fill import Fill
from trader.domain.market import Quote
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.order import Order
from trader.domain.symbols import check_symbol, quote_currency
from trader.domain.time import ensure_utc


class TickStatus(StrEnum):
    """What the actual daemon did at a tick the modelled run took."""

    RAN = "ran"  # on time
    LATE = "late"  # ran after its time (a restart, a slow start): it priced with later quotes
    SKIPPED = "skipped"  # never ran (an outage, the daemon down)
    HALTED = "halted"  # ran with trading halted: orders that add exposure did not go out


@dataclass(frozen=True, slots=True)
class TickRecord:
    """`at` is the tick's time as both runs name it (the one in its orders' client ids)."""

    at: datetime
    status: TickStatus
    ran_at: datetime | None = None  # when the daemon ran it; None when skipped

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", ensure_utc(self.at, "tick time"))
        if not isinstance(self.status, TickStatus):
            raise DomainError(f"tick status must be a TickStatus, got {self.status!r}")
        if self.ran_at is not None:
            object.__setattr__(self, "ran_at", ensure_utc(self.ran_at, "tick ran_at"))


class RiskActionKind(StrEnum):
    REFUSED = "refused"  # the order did not go out
    REDUCED = "reduced"  # it went out smaller than the strategy asked


@dataclass(frozen=True, slots=True)
class RiskAction:
    """The risk checks refused or cut the order of `symbol` decided at tick `at`."""

    at: datetime
    symbol: str
    kind: RiskActionKind
    rule: str  # the rule's label: "max_position", "halted", ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", ensure_utc(self.at, "risk action time"))
        check_symbol(self.symbol)
        if not isinstance(self.kind, RiskActionKind):
            raise DomainError(f"risk action kind must be a RiskActionKind, got {self.kind!r}")


def _frozen_decimals(values: Mapping[str, Decimal], name: str) -> Mapping[str, Decimal]:
    return MappingProxyType({key: to_decimal(value, name) for key, value in values.items()})


@dataclass(frozen=True)
class OrderRecord:
    """One order as it was sent (its amount after sizing and risk; `created_at` is the tick
    that decided it), the quote that decision priced with, and the fills it got.
    `mids_at_fill`: by fill id, the market's mid when the fill happened, which measures the
    delay between the decision and the fill; a fill without one has no delay measured (its
    move counts as slippage)."""

    order: Order
    quote: Quote
    fills: tuple[Fill, ...] = ()
    mids_at_fill: Mapping[str, Decimal] = field(default_factory=dict)

    def __post_init__(self) -> None:
        order = self.order
        if self.quote.symbol != order.symbol:
            raise DomainError(
                f"order {order.client_order_id} of {order.symbol} priced with a quote of "
                f"{self.quote.symbol}"
            )
        object.__setattr__(self, "fills", tuple(self.fills))
        with exact():
            filled = sum((fill.amount for fill in self.fills), ZERO)
        for fill in self.fills:
            if (fill.client_order_id, fill.symbol, fill.side) != (
                order.client_order_id,
                order.symbol,
                order.side,
            ):
                raise DomainError(f"fill {fill.fill_id} is not of order {order.client_order_id}")
        if filled > order.amount:
            raise DomainError(
                f"order {order.client_order_id} filled {filled}, more than its {order.amount}"
            )
        fill_ids = {fill.fill_id for fill in self.fills}
        if len(fill_ids) != len(self.fills):
            raise DomainError(f"order {order.client_order_id} lists a fill twice")
        unknown = sorted(set(self.mids_at_fill) - fill_ids)
        if unknown:
            raise DomainError(f"mids at fill for fills the order has not: {', '.join(unknown)}")
        mids = {k: positive_decimal(v, "mid at fill") for k, v in self.mids_at_fill.items()}
        object.__setattr__(self, "mids_at_fill", MappingProxyType(mids))

    @property
    def key(self) -> str:
        return self.order.client_order_id

    @property
    def filled(self) -> Decimal:
        with exact():
            return sum((fill.amount for fill in self.fills), ZERO)


@dataclass(frozen=True)
class Run:
    """One run over the period: its equity at the start and the end as it recorded them (the
    end valued at the period's end marks), its positions at the start (signed amounts), its
    orders, and what its risk checks refused or cut."""

    start_equity: Decimal
    end_equity: Decimal
    orders: tuple[OrderRecord, ...] = ()
    start_positions: Mapping[str, Decimal] = field(default_factory=dict)
    risk_actions: tuple[RiskAction, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "start_equity", to_decimal(self.start_equity, "start equity"))
        object.__setattr__(self, "end_equity", to_decimal(self.end_equity, "end equity"))
        object.__setattr__(self, "orders", tuple(self.orders))
        object.__setattr__(self, "risk_actions", tuple(self.risk_actions))
        positions = _frozen_decimals(self.start_positions, "start position")
        object.__setattr__(self, "start_positions", positions)
        keys = [record.key for record in self.orders]
        if len(set(keys)) != len(keys):
            raise DomainError("a run lists an order twice")


@dataclass(frozen=True)
class Period:
    """The two runs of one period, the marks their equities are valued at (by symbol), and
    the actual run's ticks. A tick the modelled run decided at that has no record here
    counts as skipped: the daemon's ledger has no trace of it."""

    currency: str
    start_marks: Mapping[str, Decimal]
    end_marks: Mapping[str, Decimal]
    modelled: Run
    actual: Run
    actual_ticks: tuple[TickRecord, ...] = ()

    def __post_init__(self) -> None:
        if not self.currency:
            raise DomainError("the period's currency is empty")
        for name in ("start_marks", "end_marks"):
            marks = getattr(self, name)
            checked = {check_symbol(s): positive_decimal(p, name) for s, p in marks.items()}
            object.__setattr__(self, name, MappingProxyType(checked))
        object.__setattr__(self, "actual_ticks", tuple(self.actual_ticks))
        times = [tick.at for tick in self.actual_ticks]
        if len(set(times)) != len(times):
            raise DomainError("the actual run lists a tick twice")
        for run in (self.modelled, self.actual):
            for symbol, amount in run.start_positions.items():
                if amount and (symbol not in self.start_marks or symbol not in self.end_marks):
                    raise DomainError(f"a start position in {symbol} needs its start and end marks")
            for record in run.orders:
                symbol = record.order.symbol
                if quote_currency(symbol) != self.currency:
                    raise DomainError(f"{symbol} is not quoted in the period's {self.currency}")
                if record.fills and symbol not in self.end_marks:
                    raise DomainError(f"{symbol} traded but has no end mark")
