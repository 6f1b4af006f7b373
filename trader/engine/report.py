"""What one tick tells the outside: its report, and the hooks telemetry attaches to (told after
each tick and each change of the trading state). The stages of the tick write the report as
they go; nothing here depends on them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from structlog.typing import FilteringBoundLogger

from trader.domain import ZERO, Fill, Forecast, Order, Portfolio, Quote, Signal
from trader.market.step import TickData
from trader.risk.engine import Verdict
from trader.risk.state import TradingStatus

STAGES = ("data", "fills", "forecast", "strategy", "orders", "ledger")  # "rollback" when needed


@dataclass
class TickReport:
    at: datetime
    timings: dict[str, float] = field(default_factory=dict)
    failed_stages: list[str] = field(default_factory=list)
    ready: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    forecasts: list[Forecast] = field(default_factory=list)
    decisions: list[Signal] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)  # every order state change this tick
    fills: list[Fill] = field(default_factory=list)
    refusals: list[tuple[str, Verdict]] = field(default_factory=list)
    equity: Decimal = ZERO
    status: TradingStatus | None = None
    # For telemetry: the quotes the tick priced with, when every quote that came was the book
    # (a stale one too), the marks its orders and equity used (set by the orders stage, or
    # the ledger stage when no orders stage ran), the drawdown and the day's loss it saw, and
    # the portfolio once booked (None when the tick could not book).
    quotes: dict[str, Quote] = field(default_factory=dict)
    quote_times: dict[str, datetime] = field(default_factory=dict)
    marks: dict[str, Decimal] = field(default_factory=dict)
    drawdown: float = 0.0
    daily_loss: float = 0.0
    portfolio: Portfolio | None = None
    write_failures: int = 0  # writes the ledger's disk refused this tick (write_outage)
    # Perpetuals valued on a mark the venue did not give at this tick (a live feed's refresh
    # failed), with the tick that read the mark in use (None: no mark read yet).
    stale_marks: dict[str, datetime | None] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        """What the ledger keeps: ok; degraded (a stage failed, or a perpetual was valued on a
        stale mark, the tick still booked); failed (nothing booked). A skipped symbol leaves it
        ok; the metrics count a tick by what an operator needs to see instead
        (`trader.telemetry.labels.tick_outcome`)."""
        failed = self.failed_stages
        if not failed:
            return "degraded" if self.stale_marks else "ok"
        return "failed" if {"data", "ledger", "rollback"}.intersection(failed) else "degraded"

    def saw(self, data: TickData) -> None:
        """What the data step found: the symbols ready, their quotes, why the others skip."""
        self.ready = list(data.ready)
        self.quotes = {s: d.quote for s, d in data.ready.items()}
        self.quote_times = dict(data.quote_times)
        self.skipped = {s: str(r) for s, r in data.skipped.items()}


class EngineHooks(Protocol):
    """Where telemetry attaches (Prometheus, MQTT): told after each tick and state change."""

    def on_tick(self, report: TickReport) -> None: ...

    def on_state(self, status: TradingStatus) -> None: ...


class NoHooks:
    def on_tick(self, report: TickReport) -> None:
        return None

    def on_state(self, status: TradingStatus) -> None:
        return None


def announce(change: TradingStatus, hooks: EngineHooks, log: FilteringBoundLogger) -> None:
    """A change of the trading state, once it is recorded: logged, and told to the hooks."""
    log.warning("trading state", state=str(change.state), reason=change.reason)
    hooks.on_state(change)
