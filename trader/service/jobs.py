"""The jobs that run on the wall clock between ticks: the real bid/ask for readiness and the
metrics, an equity snapshot at those quotes, the MQTT heartbeat and a periodic reconciliation
with the broker, and one more the moment the exchange answers again after an outage. A job
that misses its slot is counted, never queued up."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from structlog.typing import FilteringBoundLogger as Logger

from trader.daemon.jobs import WallJobs
from trader.domain import DomainError, Quote
from trader.market.feed import ExchangeCallFailed
from trader.market.hygiene import RawQuote, SkipReason, check_quote, quote_time
from trader.market.quotes import synthetic_quote
from trader.service.exchange import ExchangeConnection
from trader.service.health import publish_verdict
from trader.service.parts import Parts
from trader.telemetry import events


async def reconcile(
    parts: Parts, lock: asyncio.Lock, log: Logger, *, unless_stopping: bool = False
) -> None:
    """Reconcile the ledger with the broker (between ticks) and mark /readyz's "reconciled".
    `unless_stopping`: not when the daemon began stopping (or failed to start) while this
    waited for the lock."""
    engine, venue = parts.engine, parts.venue
    assert engine is not None
    assert venue is not None
    async with lock:
        if unless_stopping and (parts.phase == "stopping" or parts.phase.startswith("failed")):
            return
        try:
            report = await engine.reconcile(venue.clock.now())
        except Exception:
            log.exception("reconciliation failed")
            return
    parts.readiness.mark(
        "reconciled",
        bool(engine.reconciled),
        report.summary if not engine.reconciled else "reconciled",
    )


class ReconcileOnRecovery:
    """A reconciliation the moment the exchange answers again after an outage, so that the
    next tick trades: one that failed while it was away (`engine.reconciled` False) would
    otherwise keep every order refused as "unreconciled" until the next scheduled one.

    Under the tick lock, in the background, never two at a time and at most one per return
    (a return while one runs has one more run after it). Its calls share the feed's ccxt
    client and so its rate limiter (`enableRateLimit`: every request waits its cost in the
    exchange's `rateLimit`, e.g. Binance's 50 ms a weight unit), behind the ticks' and quotes'
    calls, and the live broker's retries back off as the venue asks."""

    def __init__(self, parts: Parts, lock: asyncio.Lock, log: Logger) -> None:
        self.parts, self.lock, self.log = parts, lock, log
        self._running: asyncio.Task[None] | None = None
        self._again = False

    def __call__(self) -> None:
        engine = self.parts.engine
        if engine is None or not engine.broker.external or self.parts.phase == "stopping":
            return  # a paper account is this process's own: nothing happened meanwhile
        if self._running is not None:
            if not self._running.done():
                self._again = True
                return
            if self._running in self.parts.tasks:  # outages over months grow no list
                self.parts.tasks.remove(self._running)
        self._running = asyncio.get_running_loop().create_task(self._run())
        self._running.set_name("reconcile on recovery")
        self.parts.tasks.append(self._running)  # ended with the other background tasks

    async def _run(self) -> None:
        again = True
        while again:
            self._again = False
            broker = self.parts.engine.broker.name if self.parts.engine is not None else "?"
            self.log.info("exchange back: reconciling now", broker=broker)
            work = asyncio.ensure_future(
                reconcile(self.parts, self.lock, self.log, unless_stopping=True)
            )
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                await work  # a stop lets a reconciliation under way finish, as the jobs do
                raise
            again = self._again and self.parts.phase != "stopping"


@dataclass(frozen=True)
class ScheduledJobs:
    parts: Parts
    exchange: ExchangeConnection
    lock: asyncio.Lock
    log: Logger

    def start(self) -> WallJobs:
        schedule = self.parts.settings.schedule
        jobs = WallJobs(on_skipped=self._skipped)
        jobs.every("quotes", schedule.quote_poll_interval_s, self.poll_quotes)
        jobs.every(
            "reconcile", schedule.reconcile_interval_s, self.reconcile,
            first_in_s=schedule.reconcile_interval_s,
        )  # fmt: skip
        jobs.every("equity", schedule.equity_snapshot_interval_s, self.snapshot_equity)
        if self.parts.link is not None:
            jobs.every("heartbeat", self.parts.settings.mqtt.heartbeat_interval_s, self.heartbeat)
        jobs.start()
        self.exchange.when_back(ReconcileOnRecovery(self.parts, self.lock, self.log))
        return jobs

    async def reconcile(self) -> None:
        await reconcile(self.parts, self.lock, self.log)

    async def poll_quotes(self) -> None:
        parts = self.parts
        engine, venue, metrics, market = (
            parts.engine,
            parts.venue,
            parts.metrics,
            parts.settings.market,
        )
        if engine is None or venue is None or metrics is None:
            return
        now = venue.clock.now()
        max_age = timedelta(seconds=market.max_quote_age_s)
        symbols = list(market.symbols)
        raw: dict[str, RawQuote] = {}
        if market.add_latest:
            try:
                raw = await engine.market.feed.top_of_book(symbols)
            except ExchangeCallFailed as error:
                self.exchange.set(False, f"{engine.market.feed.name} unreachable: {error.kind}")
                parts.quotes = dict.fromkeys(symbols, SkipReason.EXCHANGE_UNAVAILABLE)
                return  # the quote ages go on growing from the newest quotes seen
            self.exchange.set(True, "reachable")
        else:
            windows = engine.market.windows
            raw = {
                s: synthetic_quote(last) for s in symbols if (last := windows[s].last) is not None
            }
        quotes: dict[str, Quote | SkipReason] = {}
        for symbol in symbols:
            came = raw.get(symbol)
            if came is not None:
                metrics.quote_seen(symbol, quote_time(came))  # too old to use, or not
            quotes[symbol] = quote = check_quote(came, symbol, now, max_age)
            if isinstance(quote, Quote):
                metrics.observe_quote(symbol, quote)
        parts.quotes = quotes

    async def snapshot_equity(self) -> None:
        """Positions marked at the latest quotes between ticks (metrics and a pnl event); the
        ledger keeps the equity each tick booked."""
        parts = self.parts
        engine, metrics, venue = parts.engine, parts.metrics, parts.venue
        if engine is None or metrics is None or venue is None:
            return
        marks: dict[str, Decimal] = {}
        for symbol, window in engine.market.windows.items():
            if window.last is not None:
                marks[symbol] = Decimal(repr(window.last.close))
        marks.update({s: q.mid for s, q in parts.quotes.items() if isinstance(q, Quote)})
        portfolio = engine.portfolio
        try:
            equity = portfolio.equity(marks)
            unrealized = portfolio.unrealized_pnl(marks)
        except DomainError:
            return  # a position with no price yet: nothing is guessed
        drawdown = engine.risk.limit_drawdown(equity)  # as the ticks report it
        # Between ticks the UTC day may have turned: its loss is then from the last tick's.
        daily_loss = engine.risk.daily_loss(equity, venue.clock.now())
        metrics.observe_book(portfolio, marks, equity, drawdown, daily_loss)
        if parts.link is not None:
            parts.link.publish(
                events.pnl(
                    parts.settings.instance,
                    venue.clock.now(),
                    equity=equity,
                    cash=portfolio.cash,
                    fees_paid=portfolio.fees_paid,
                    drawdown=drawdown,
                    positions={s: p.amount for s, p in portfolio.positions.items()},
                    realized=dict(portfolio.realized_pnl),
                    unrealized=unrealized,
                    source="snapshot",
                )
            )

    async def heartbeat(self) -> None:
        parts = self.parts
        if parts.link is None or parts.venue is None:
            return
        verdict = parts.readiness.evaluate()
        publish_verdict(parts, verdict)
        last = parts.last_report.at.isoformat() if parts.last_report else None
        parts.link.publish(
            events.heartbeat(
                parts.settings.instance,
                parts.venue.clock.now(),
                ready=verdict.ready,
                not_ready=verdict.reasons(),
                uptime_s=round(time.monotonic() - parts.started, 1),
                last_tick=last,
                trading_state=str(parts.engine.risk.state) if parts.engine is not None else None,
            )
        )

    def _skipped(self, job: str) -> None:
        if self.parts.metrics is not None:
            self.parts.metrics.job_missed(job)
