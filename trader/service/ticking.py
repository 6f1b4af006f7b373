"""The ticks: one engine tick at each bar close (the tick loop's schedule), and what the
daemon learns from each one (data freshness, whether the exchange answered, lateness)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

from structlog.typing import FilteringBoundLogger as Logger

from trader.daemon.ticks import TickLoop
from trader.engine.report import TickReport
from trader.ledger.runs import LateTick, record_late
from trader.risk.state import TradingStatus
from trader.service.exchange import ExchangeConnection
from trader.service.parts import Parts, StartupFailed
from trader.service.skill import observe_skill
from trader.service.status import publish_status

# A tick this late (past its bar close and settle delay) is kept in the ledger as late: a
# second is far beyond a healthy loop's lag, and short beside a bar.
LATE_S = 1.0


@dataclass(frozen=True)
class Ticking:
    parts: Parts
    exchange: ExchangeConnection
    log: Logger
    late: list[LateTick] = field(default_factory=list)  # to book with the next tick

    def loop(self, lock: asyncio.Lock) -> TickLoop:
        parts = self.parts
        assert parts.venue is not None
        return TickLoop(
            self.tick,
            parts.venue.times,
            parts.venue.clock,
            grace_s=parts.settings.schedule.misfire_grace_s,
            lock=lock,
            observer=self,
        )

    async def tick(self, at: datetime) -> TickReport:
        engine, controller = self.parts.engine, self.parts.controller
        assert engine is not None
        assert controller is not None
        if not self.exchange.market_started():
            try:
                await self.exchange.start_market()  # windows reload from the ledger once back
            except StartupFailed as failed:
                self.log.error("market data", reason=failed.reason)
        report = await engine.tick(at)
        if self.late:
            late, self.late[:] = list(self.late), []
            try:
                await record_late(engine.ledger.database, late)
            except Exception as error:  # said; the tick itself is booked
                self.log.error("late ticks not recorded", count=len(late), error=repr(error))
        await observe_skill(self.parts, report, self.log)
        await controller.after_tick(report)
        return report

    def on_lateness(self, at: datetime, lateness_s: float, *, missed: bool) -> None:
        if self.parts.metrics is not None:
            self.parts.metrics.observe_lateness(lateness_s, missed=missed)
        if missed or lateness_s >= LATE_S:
            self.late.append(LateTick(at, lateness_s, missed))

    def on_due(self, at: datetime | None) -> None:
        """The tick loop's next tick; None: its times ran out (a replay has run them all)."""
        metrics = self.parts.metrics
        if metrics is None:
            return
        metrics.schedule.due(None if at is None else at.timestamp())
        if at is None and self.parts.replay is not None:
            metrics.schedule.replay_finished.set(1)

    def after_report(self, report: TickReport) -> None:
        """Every tick's report (the engine's hook), before telemetry publishes it."""
        parts = self.parts
        parts.last_report = report
        if parts.engine is not None and parts.metrics is not None:
            market = parts.engine.market
            contiguous = {s: w.contiguous for s, w in market.windows.items()}
            parts.metrics.observe_windows(market.missing, contiguous)
            parts.metrics.feed.observe_no_trade(market.no_trade.counts, market.no_trade.feeds)
        if report.ready:
            self.exchange.set(True, "reachable")
        elif "exchange_unavailable" in report.skipped.values():  # none ready, calls failing
            self.exchange.set(False, f"{self.exchange.feed_name()} unreachable")

    def on_state(self, status: TradingStatus) -> None:
        """A trading state change: the retained status follows once the daemon is ready."""
        if self.parts.phase == "ready":
            publish_status(self.parts, "ready")
