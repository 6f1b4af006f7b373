"""Start-up after telemetry, in the order that shows an operator the most useful failure
first. Each step names itself (/readyz, the systemd status, the log); a step that cannot go on
raises `StartupFailed` with its exit code and the fix. An unreachable exchange is not one of
them: trading waits for it while the rest starts."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from decimal import InvalidOperation
from functools import partial
from pathlib import Path

from structlog.typing import FilteringBoundLogger as Logger

from trader.broker.safety import StartRefused
from trader.daemon.control import Controller
from trader.daemon.inference import (
    InferenceWorker,
    ModelSlot,
    leave_a_core_to_the_loop,
    warm_up_requests,
)
from trader.daemon.reload import SettingsSource
from trader.domain import DomainError, Timeframe
from trader.engine.pipeline import Engine
from trader.exit_codes import EX_CONFIG, EX_DATAERR, EX_IOERR, EX_UNAVAILABLE
from trader.forecast.build import ModelUnavailable, build_forecaster
from trader.forecast.device_choice import DeviceChoice, DeviceUnavailable
from trader.forecast.provenance import model_labels
from trader.ledger.database import Database, LedgerError
from trader.ledger.funding import read_funding
from trader.ledger.integrity import unreadable_refusal
from trader.ledger.nonces import CommandNonces
from trader.ledger.trading import TradingLedger
from trader.ledger.write_failure import cannot_write, write_failure
from trader.runner import (
    Venue,
    build_engine,
    live_venue,
    model_device,
    model_names,
    replay_perp_tapes,
    replay_times,
    replay_venue,
)
from trader.service import health
from trader.service.control_surface import ControlSurface
from trader.service.exchange import ExchangeConnection
from trader.service.jobs import ScheduledJobs, reconcile
from trader.service.parts import Parts, StartupFailed
from trader.service.run_record import record_run
from trader.service.shutdown import close_ledger
from trader.service.skill import start_skill
from trader.service.status import model_fields, publish_status, runtime, status_text
from trader.service.ticking import Ticking
from trader.service.trade_stream import start_trade_stream
from trader.strategy.shorts import modelled_short_caveat
from trader.telemetry.commands import MAX_NONCES
from trader.telemetry.hooks import TelemetryHooks
from trader.telemetry.metrics import CountedSkips


@dataclass(frozen=True)
class Startup:
    parts: Parts
    exchange: ExchangeConnection
    ticking: Ticking
    control: ControlSurface
    reload_source: SettingsSource
    log: Logger

    async def run(self, stack: AsyncExitStack) -> None:
        parts = self.parts
        caveat = modelled_short_caveat(parts.settings)
        if caveat is not None:  # said first, once: a paper run's spot shorts are not tradeable
            self.log.warning("shorts modelled", caveat=caveat)
        self._step("device check")
        device = self._check_device()

        self._step("ledger recovery")
        database = await self._open_ledger(stack)
        venue = self._make_venue(await TradingLedger(database).last_tick())
        if venue is None:
            return  # a replay with every tick in the ledger already
        await record_run(parts.settings, database, venue, stack, self.log)
        worker = InferenceWorker(device.where)
        engine = await self._recover(stack, database, venue, worker, device)
        lock = asyncio.Lock()
        parts.controller = Controller(
            engine, lock, venue.clock, self.reload_source, on_reloaded=self.control.on_reloaded
        )

        self._step("broker reconciliation")
        await reconcile(parts, lock, self.log)

        self._step("market data")
        if not await self.exchange.start_market():
            parts.background(self.exchange.keep_connecting(), "market connect")

        self._step("model load and warm-up")
        await self._load_models(worker, device)

        self._step("scheduler")
        parts.ticks = self.ticking.loop(lock)
        parts.jobs = ScheduledJobs(parts, self.exchange, lock, self.log).start()
        await start_trade_stream(parts, lock, stack, self.log)  # Alpaca: fills heard at once

        self._ready(venue)

    def _step(self, step: str) -> None:
        self.parts.phase = f"starting: {step}"
        self.parts.readiness.mark("started", False, self.parts.phase)
        self.parts.notifier.status(self.parts.phase)
        self.log.info("start-up", step=step)

    def _check_device(self) -> DeviceChoice:
        parts, settings, metrics = self.parts, self.parts.settings, self.parts.metrics
        assert metrics is not None
        try:
            parts.device = device = model_device(settings)
        except DeviceUnavailable as error:
            raise StartupFailed(EX_UNAVAILABLE, "device check", str(error)) from error
        metrics.describe_device(device.describe())
        for name in model_names(settings):  # trader run said them in its first lines
            for labels in model_labels(name, settings.forecast):
                metrics.describe_model(labels)
        if device.where == "cpu" and model_names(settings) != ["baseline"]:
            self.log.info("inference threads", torch_threads=leave_a_core_to_the_loop())
        # The series exist from the first scrape, with the mode the settings ask for.
        metrics.prepare_models(
            (name, device.where, runtime(settings, name)) for name in model_names(settings)
        )
        return device

    async def _open_ledger(self, stack: AsyncExitStack) -> Database:
        try:
            database = await Database.open(self.parts.settings.ledger.path)
        except LedgerError as error:
            raise ledger_refused(self.parts.settings.ledger.path, error) from error
        stack.push_async_callback(close_ledger, database, self.log)
        self.parts.nonces = CommandNonces(database, MAX_NONCES)
        return database

    def _make_venue(self, last: datetime | None) -> Venue | None:
        """Where bars, quotes and time come from; None for a replay with nothing left to run.
        The metrics measure quote ages on the venue's clock."""
        parts, settings, replay = self.parts, self.parts.settings, self.parts.replay
        until: datetime | None = None  # a replay's last tick
        if replay is None:
            try:
                parts.venue = live_venue(settings, last, self.exchange.on_error)
            except ValueError as error:
                raise StartupFailed(EX_CONFIG, "market data", str(error)) from error
        else:
            times = replay_times(settings, replay.replay, last)
            if not times:
                self.log.info("replay: every tick is in the ledger already", last=str(last))
                return None
            until = times[-1]
            parts.venue = replay_venue(
                settings, replay.replay, times, replay.speed, resume_after=last
            )
        if parts.metrics is not None:
            parts.metrics.use_clock(parts.venue.clock, parts.venue.calendars)
        self._calendars(parts.venue, until)
        return parts.venue

    def _calendars(self, venue: Venue, until: datetime | None) -> None:
        """Calendars whose known sessions have ended or end soon (or before a replay's last
        tick) are said at every start, in /readyz, and in the metrics."""
        parts = self.parts
        for notice in venue.calendars.notices(venue.clock.now(), until):
            self.log.warning("calendar sessions run out", **notice.fields())
        parts.readiness.add("calendars", partial(health.calendar_check, parts))
        if parts.calendar_metrics is not None:
            parts.calendar_metrics.watch(venue.calendars, venue.clock)

    async def _recover(
        self,
        stack: AsyncExitStack,
        database: Database,
        venue: Venue,
        worker: InferenceWorker,
        device: DeviceChoice,
    ) -> Engine:
        """The engine, from the ledger: cash, positions, open orders, the trading state."""
        parts, settings, metrics = self.parts, self.parts.settings, self.parts.metrics
        assert metrics is not None
        parts.readiness.add("exchange", self.exchange.check)
        parts.readiness.add("data", partial(health.data_check, parts))
        parts.readiness.mark("model", False, "not loaded yet")
        parts.slots = [ModelSlot(n, device.where, metrics) for n in model_names(settings)]
        hooks = TelemetryHooks(
            metrics, settings.instance, parts.link,
            on_tick=self.ticking.after_report, on_state=self.ticking.on_state,
        )  # fmt: skip
        replayed = parts.replay.replay.recordings if parts.replay is not None else None
        try:
            tapes = replay_perp_tapes(settings, replayed)  # a perpetual's funding and marks
        except ValueError as error:
            worker.shutdown()
            raise StartupFailed(EX_DATAERR, "market data", str(error)) from error
        try:
            engine = await build_engine(
                settings, venue.feed, database, venue.clock.now(), forecasters=parts.slots,
                hooks=hooks, inference=worker.executor, start_market=False,
                calendars=venue.calendars, perp_tapes=tapes,
            )  # fmt: skip
        except (LedgerError, DomainError, *UNREADABLE) as error:
            worker.shutdown()
            raise ledger_refused(settings.ledger.path, error) from error
        except StartRefused as error:  # live: another instance holds a symbol, and the like
            worker.shutdown()
            raise StartupFailed(EX_CONFIG, "broker", str(error)) from error
        stack.callback(engine.close)
        stack.push_async_callback(venue.feed.close)
        parts.engine = engine
        engine.market.skips = CountedSkips(metrics=metrics)
        metrics.start_from_ledger(engine.portfolio.fees_paid, engine.risk.status)
        if engine.perps is not None:  # positions read as the perpetual account they are
            terms, account = engine.perps.terms, engine.account
            metrics.perp.use_terms(
                terms.brackets, leverage=terms.leverage, margin_mode=terms.margin_mode,
                reductions=engine.risk.reductions, funding=lambda: account.perp.funding,
            )  # fmt: skip
            # The funding counters start at the ledger's rows (a restart is no reset); the venue's
            # rows a reconciliation books from now on are counted as they are booked.
            engine.on_funding_booked = metrics.perp.funding_booked
            try:
                metrics.perp.funding_booked(await database.run(read_funding))
            except Exception:  # metrics never stop a start
                self.log.exception("the ledger's funding rows could not be counted")
        self.log.info(
            "ledger recovered",
            cash=str(engine.portfolio.cash),
            positions={s: str(p.amount) for s, p in engine.portfolio.positions.items()},
            open_orders=len(engine.broker.open_orders()),
            trading_state=str(engine.risk.state),
            last_tick=venue.resume_after.isoformat() if venue.resume_after else None,
        )
        parts.readiness.add("trading_state", partial(health.trading_state_check, parts))
        try:
            await start_skill(parts, database, venue.clock.now(), self.log)
        except UNREADABLE as error:
            raise ledger_refused(settings.ledger.path, error) from error
        return engine

    async def _load_models(self, worker: InferenceWorker, device: DeviceChoice) -> None:
        parts, settings, metrics = self.parts, self.parts.settings, self.parts.metrics
        assert metrics is not None
        parts.readiness.mark("model", False, "loading")
        parts.notifier.extend_start(600)
        requests = warm_up_requests(
            settings.market.symbols, Timeframe(settings.market.timeframe),
            settings.market.context_bars, settings.forecast.horizon, settings.forecast.quantiles,
        )  # fmt: skip
        for slot in parts.slots:
            began = time.perf_counter()
            try:
                model = await worker.run(
                    partial(build_forecaster, slot.name, settings.forecast, device)
                )
            except ModelUnavailable as error:
                raise StartupFailed(EX_UNAVAILABLE, "model load", str(error)) from error
            slot.load(model)
            try:
                warm = await worker.run(partial(slot.warm_up, requests))
            except Exception as error:
                detail = f"{slot.name}: {type(error).__name__}: {str(error)[:300]}"
                raise StartupFailed(EX_UNAVAILABLE, "model warm-up", detail) from error
            self.log.info(
                "model ready", model=slot.name, device=device.where, mode=slot.mode,
                load_s=round(time.perf_counter() - began - warm, 3), warm_up_s=round(warm, 3),
                forced_eager=slot.compile_stats.forced_eager,
            )  # fmt: skip
        metrics.prepare_models((s.name, device.where, s.mode) for s in parts.slots)
        for slot in parts.slots:  # the guard may have given up compiling during the warm-up
            metrics.set_forced_eager(slot.name, slot.compile_stats.forced_eager is not None)
        parts.readiness.mark("model", True, ", ".join(f"{s.name} ({s.mode})" for s in parts.slots))

    def _ready(self, venue: Venue) -> None:
        parts = self.parts
        parts.phase = "ready"
        parts.readiness.mark("started", True, "running")
        status = status_text(parts)
        parts.notifier.ready(status)
        publish_status(parts, "ready")
        verdict = parts.readiness.evaluate()
        self.log.info(
            "ready",
            status=status,
            venue=venue.kind,
            ready_to_trade=verdict.ready,
            not_ready=verdict.reasons(),
            **model_fields(parts),
        )


# What reading a ledger's rows raises where a stored value is damaged but its pages are sound:
# SQLite's own JSON functions, and Python's decoding of text, JSON and decimals.
UNREADABLE = (sqlite3.DatabaseError, json.JSONDecodeError, UnicodeDecodeError, InvalidOperation)


def ledger_refused(path: Path, error: Exception) -> StartupFailed:
    """Exit 74 for a ledger its disk has no room for (or will not write), else 65."""
    reason = write_failure(error)
    if reason is not None:
        return StartupFailed(EX_IOERR, "ledger recovery", str(cannot_write(path, reason)))
    if isinstance(error, UNREADABLE):
        return StartupFailed(EX_DATAERR, "ledger recovery", unreadable_refusal(path, error))
    return StartupFailed(EX_DATAERR, "ledger recovery", str(error))
