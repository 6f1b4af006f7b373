"""The daemon: one service for live paper/live trading and for replays of recorded bars.

Start-up, in the order that shows an operator the most useful failure first:

    settings -> logging (the CLI) -> telemetry up (/healthz answers from here on, /readyz
    says which step is under way) -> device check -> ledger recovery -> broker
    reconciliation -> market data -> model load and warm-up -> scheduler -> ready

A device, ledger, settings or model problem stops start-up with the reason and the fix (exit
69, 65 or 78). An unreachable exchange does not: the daemon says so plainly (log, /readyz,
metrics), keeps trying, and trades once it is back. Then READY=1 goes to systemd, the
retained MQTT status says "ready", and ticks run at each bar close plus the settle delay (or
at each recorded bar close, on the replay's simulated clock).

SIGTERM/SIGINT: no new tick or job; the running tick finishes (within
`schedule.shutdown_deadline_s`); open orders are kept or cancelled (`broker.on_shutdown`);
the ledger is checkpointed and closed; the status says "offline"; exit 0. SIGHUP reloads the
strategy and risk settings.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry

from trader import __version__
from trader.broker.safety import StartRefused, config_refusal
from trader.config import LoadedSettings
from trader.config.loader import load_from_environment
from trader.config.schema import Settings
from trader.daemon.control import Controller
from trader.daemon.inference import (
    InferenceWorker,
    ModelSlot,
    leave_a_core_to_the_loop,
    warm_up_requests,
)
from trader.daemon.jobs import WallJobs
from trader.daemon.loop_lag import LoopLagMonitor
from trader.daemon.notify import SystemdNotifier
from trader.daemon.reload import SettingsSource
from trader.daemon.ticks import TickLoop
from trader.domain import DomainError, Order, Quote, Timeframe
from trader.engine.pipeline import Engine, TickReport
from trader.exit_codes import EX_CONFIG, EX_DATAERR, EX_SOFTWARE, EX_UNAVAILABLE
from trader.forecast.build import ModelUnavailable, build_forecaster
from trader.forecast.device import DeviceChoice, DeviceUnavailable
from trader.ledger.database import Database, LedgerError
from trader.ledger.trading import TradingLedger
from trader.logging import get_logger
from trader.market.feed import ExchangeCallFailed, UnknownSymbols
from trader.market.hygiene import SkipReason, check_quote
from trader.market.quotes import synthetic_quote
from trader.market.replay_calendars import ReplayCalendars
from trader.risk.state import TradingState, TradingStatus
from trader.runner import (
    Venue,
    build_engine,
    live_venue,
    model_device,
    model_names,
    replay_settings,
    replay_times,
    replay_venue,
)
from trader.telemetry import events
from trader.telemetry.commands import CommandVerifier, Refusal
from trader.telemetry.hooks import TelemetryHooks
from trader.telemetry.http import HttpEndpoint
from trader.telemetry.metrics import CountedSkips, Metrics
from trader.telemetry.mqtt import MqttLink
from trader.telemetry.readiness import Readiness, Verdict

MARKET_RETRY_MAX_S = 60.0
NOT_CONTACTED = "not contacted yet"


def live_refusal(loaded: LoadedSettings) -> str | None:
    """Why live mode must not start, or None: live trading needs three explicit opt-ins (the
    mode, the confirmation, keys from the secrets directory or the environment). Another
    instance holding the ledger or a symbol is found when the broker is built."""
    return config_refusal(loaded.settings, loaded.origins)


class StartupFailed(Exception):
    def __init__(self, code: int, step: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.step, self.reason = code, step, reason


@dataclass(frozen=True)
class ReplayRequest:
    """`trader run --replay`: recorded bars instead of an exchange, on a simulated clock."""

    replay: ReplayCalendars  # the recordings, as their markets' calendars read them
    speed: float | None = None  # a multiple of real time; None: as fast as the engine goes
    max_ticks: int | None = None


class Service:
    def __init__(
        self,
        loaded: LoadedSettings,
        *,
        replay: ReplayRequest | None = None,
        reload_source: SettingsSource | None = None,
    ) -> None:
        self._loaded = loaded
        self._replay = replay
        self._reload_source = reload_source or self._reload_from_sources
        self._log = get_logger("trader.service", instance=loaded.settings.instance)
        self._stop = asyncio.Event()
        self._stop_reason = ""
        self._tasks: list[asyncio.Task[Any]] = []
        self._started = time.monotonic()
        # Set as start-up goes; the endpoints read them.
        self.settings = loaded.settings
        self.metrics: Metrics | None = None
        self.readiness = Readiness()
        self.endpoint: HttpEndpoint | None = None
        self.link: MqttLink | None = None
        self.notifier = SystemdNotifier.from_environment()
        self._device: DeviceChoice | None = None
        self._venue: Venue | None = None
        self._engine: Engine | None = None
        self._slots: list[ModelSlot] = []
        self._controller: Controller | None = None
        self._ticks: TickLoop | None = None
        self._market_started = False
        self._exchange: tuple[bool, str] = (False, NOT_CONTACTED)
        self._quotes: dict[str, Quote | SkipReason] = {}
        self._last_report: TickReport | None = None
        self._phase = "starting"
        self._jobs: WallJobs | None = None
        self._verifier: CommandVerifier | None = None

    # --- the whole life ---------------------------------------------------------------------

    async def run(self) -> int:
        refusal = live_refusal(self._loaded)
        if refusal is not None:
            self._log.error("refusing to start", reason=refusal)
            return EX_CONFIG
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop, signum.name)
        loop.add_signal_handler(signal.SIGHUP, self._on_hangup)
        try:
            async with AsyncExitStack() as stack:
                return await self._run(stack)
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(signum)
            self.notifier.close()

    def request_stop(self, reason: str) -> None:
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()

    async def _run(self, stack: AsyncExitStack) -> int:
        try:
            self.settings = self._prepare(self._loaded.settings)
        except ValueError as error:
            self._log.error("refusing to start", reason=str(error))
            return EX_CONFIG
        self._log_start()
        try:
            await self._start_telemetry(stack)
        except StartupFailed as failed:
            self._log.error("cannot start", step=failed.step, reason=failed.reason)
            return failed.code
        starting = asyncio.create_task(self._start_up(stack))
        stopping = asyncio.create_task(self._stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            with suppress(asyncio.CancelledError):
                await starting
            self._log.info("stopping", signal=self._stop_reason, during="start-up")
            await self._shut_down(stack)
            return 0
        try:
            try:
                starting.result()
            except StartupFailed:
                raise
            except Exception as error:  # a bug, or something nobody foresaw: say it, exit 70
                self._log.exception("start-up failed unexpectedly", step=self._phase)
                raise StartupFailed(EX_SOFTWARE, self._phase, repr(error)[:300]) from error
        except StartupFailed as failed:
            self._log.error("cannot start", step=failed.step, reason=failed.reason)
            self._phase = f"failed: {failed.step}"
            self.notifier.status(f"cannot start ({failed.step}): {failed.reason}")
            await self._stop_background(f"cannot start: {failed.reason}")
            return failed.code
        if self._ticks is None:  # a replay with nothing left to run
            await self._shut_down(stack)
            return 0
        await self._serve()
        await self._shut_down(stack)
        return 0

    async def _serve(self) -> None:
        """Tick until a stop signal, or until a replay runs out of bars."""
        assert self._ticks is not None
        assert self._venue is not None
        ticking = asyncio.create_task(
            self._ticks.run(
                self._stop,
                after=self._venue.resume_after,
                max_ticks=self._replay.max_ticks if self._replay else None,
            )
        )
        stopping = asyncio.create_task(self._stop.wait())
        await asyncio.wait({ticking, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not self._stop.is_set():  # the ticks ran out (a replay's end), or the loop failed
            if ticking.exception() is not None:
                self._log.error("the tick loop failed", error=repr(ticking.exception()))
            else:
                self._log.info(
                    "replay finished" if self._venue.kind == "replay" else "ticks finished",
                    ticks=ticking.result(),
                    last=self._ticks.last.isoformat() if self._ticks.last else None,
                    equity=str(self._last_report.equity) if self._last_report else None,
                )
            self.request_stop("end of replay")
            return
        self._log.info("stopping", signal=self._stop_reason)
        self._phase = "stopping"
        self.notifier.stopping(f"stopping ({self._stop_reason})")
        if self.link is not None:
            self.link.set_status(self._status_event("stopping"))
        deadline = self.settings.schedule.shutdown_deadline_s
        _, late = await asyncio.wait({ticking}, timeout=deadline)
        if late:
            # Crash-only: a tick is one ledger transaction, whole or absent, and re-running it
            # never places an order twice. Abandoning it is safe; waiting forever is not.
            self._log.error("tick abandoned at the shutdown deadline", deadline_s=deadline)
            ticking.cancel()
            with suppress(asyncio.CancelledError):
                await ticking

    # --- start-up ---------------------------------------------------------------------------

    def _prepare(self, settings: Settings) -> Settings:
        """The settings as this run uses them (a replay: its recordings' symbols, timeframe)."""
        if self._replay is None:
            return settings
        return replay_settings(settings, self._replay.replay.recordings)

    def _reload_from_sources(self) -> Settings:
        return self._prepare(load_from_environment(self._loaded.config_file).settings)

    def _step(self, step: str) -> None:
        self._phase = f"starting: {step}"
        self.readiness.mark("started", False, self._phase)
        self.notifier.status(self._phase)
        self._log.info("start-up", step=step)

    async def _start_telemetry(self, stack: AsyncExitStack) -> None:
        settings = self.settings
        self.metrics = metrics = Metrics(
            CollectorRegistry(), settings.market.symbols, broker_mode=settings.broker.mode
        )
        self.readiness.mark("started", False, "starting")
        if settings.metrics.enabled:
            self.endpoint = HttpEndpoint(
                metrics.registry,
                self.readiness,
                host=settings.metrics.host,
                port=settings.metrics.port,
                on_verdict=self._on_verdict,
            )
            try:
                await self.endpoint.start()
            except OSError as error:
                raise StartupFailed(
                    EX_UNAVAILABLE,
                    "metrics endpoint",
                    f"cannot listen on {settings.metrics.host}:{settings.metrics.port} "
                    f"({error.strerror or error}); set metrics.port (0: any free port) or "
                    "metrics.enabled = false",
                ) from error
            stack.push_async_callback(self.endpoint.stop)
            self._log.info(
                "serving metrics",
                url=f"http://{settings.metrics.host}:{self.endpoint.port}/metrics",
                port=self.endpoint.port,
            )
        if settings.mqtt.enabled:
            self.link = MqttLink(
                settings.mqtt,
                settings.instance,
                on_connected=metrics.mqtt_connected.set,
                on_dropped=metrics.mqtt_dropped.inc,
                on_command=self._on_command,
            )
            self.link.set_status(self._status_event("starting"))
            self._background(self.link.run(), "mqtt")
        self._background(self.notifier.watchdog(), "watchdog")
        monitor = LoopLagMonitor(on_lag=metrics.loop_lag.set)
        self._background(monitor.run(), "loop lag")

    def _background(self, work: Awaitable[None], name: str) -> None:
        self._tasks.append(asyncio.ensure_future(work))
        self._tasks[-1].set_name(name)

    async def _start_up(self, stack: AsyncExitStack) -> None:
        settings, metrics = self.settings, self.metrics
        assert metrics is not None
        self._step("device check")
        try:
            self._device = device = model_device(settings)
        except DeviceUnavailable as error:
            raise StartupFailed(EX_UNAVAILABLE, "device check", str(error)) from error
        metrics.describe_device(device.describe())
        if device.device.type == "cpu" and model_names(settings) != ["baseline"]:
            self._log.info("inference threads", torch_threads=leave_a_core_to_the_loop())
        # The series exist from the first scrape, with the mode the settings ask for.
        metrics.prepare_models(
            (name, str(device.device), self._runtime(name)) for name in model_names(settings)
        )

        self._step("ledger recovery")
        try:
            database = await Database.open(settings.ledger.path)
        except LedgerError as error:
            raise StartupFailed(EX_DATAERR, "ledger recovery", str(error)) from error
        stack.push_async_callback(self._close_ledger, database)
        last = await TradingLedger(database).last_tick()
        venue = self._make_venue(last)
        if venue is None:
            self._log.info("replay: every tick is in the ledger already", last=str(last))
            return
        self._venue = venue
        self.readiness.add("exchange", lambda: self._exchange)
        self.readiness.add("data", self._data_check)
        self.readiness.mark("model", False, "not loaded yet")
        worker = InferenceWorker(str(device.device))
        self._slots = [ModelSlot(name, device.device, metrics) for name in model_names(settings)]
        engine = await self._build_engine(stack, database, venue, worker)
        self.readiness.add("trading_state", self._state_check)
        lock = asyncio.Lock()
        self._controller = Controller(
            engine, lock, venue.clock, self._reload_source, on_reloaded=self._on_reloaded
        )

        self._step("broker reconciliation")
        await self._reconcile(lock)

        self._step("market data")
        if not await self._start_market():
            self._background(self._keep_connecting(), "market connect")

        self._step("model load and warm-up")
        await self._load_models(worker)

        self._step("scheduler")
        self._start_scheduler(venue, lock)

        self._phase = "ready"
        self.readiness.mark("started", True, "running")
        status = self._status_text()
        self.notifier.ready(status)
        if self.link is not None:
            self.link.set_status(self._status_event("ready"))
        verdict = self.readiness.evaluate()
        self._log.info(
            "ready",
            status=status,
            venue=venue.kind,
            ready_to_trade=verdict.ready,
            not_ready=verdict.reasons(),
            **self._model_fields(),
        )

    async def _build_engine(
        self, stack: AsyncExitStack, database: Database, venue: Venue, worker: InferenceWorker
    ) -> Engine:
        settings, metrics = self.settings, self.metrics
        assert metrics is not None
        hooks = TelemetryHooks(
            metrics,
            settings.instance,
            self.link,
            on_tick=self._after_tick_report,
            on_state=self._on_state,
        )
        now = venue.clock.now()
        try:
            engine = await build_engine(
                settings, venue.feed, database, now, forecasters=self._slots, hooks=hooks,
                inference=worker.executor, start_market=False, calendars=venue.calendars,
            )  # fmt: skip
        except (LedgerError, DomainError) as error:
            worker.shutdown()
            raise StartupFailed(EX_DATAERR, "ledger recovery", str(error)) from error
        except StartRefused as error:  # live: another instance holds a symbol, and the like
            worker.shutdown()
            raise StartupFailed(EX_CONFIG, "broker", str(error)) from error
        stack.callback(engine.close)
        stack.push_async_callback(venue.feed.close)
        self._engine = engine
        engine.market.skips = CountedSkips(metrics=metrics)
        metrics.start_from_ledger(engine.portfolio.fees_paid, engine.risk.status)
        self._log.info(
            "ledger recovered",
            cash=str(engine.portfolio.cash),
            positions={s: str(p.amount) for s, p in engine.portfolio.positions.items()},
            open_orders=len(engine.broker.open_orders()),
            trading_state=str(engine.risk.state),
            last_tick=venue.resume_after.isoformat() if venue.resume_after else None,
        )
        return engine

    def _start_scheduler(self, venue: Venue, lock: asyncio.Lock) -> None:
        schedule = self.settings.schedule
        self._ticks = TickLoop(
            self._tick,
            venue.times,
            venue.clock,
            grace_s=schedule.misfire_grace_s,
            lock=lock,
            observer=self,
        )
        jobs = WallJobs(on_skipped=self._job_skipped)

        async def reconcile() -> None:
            await self._reconcile(lock)

        jobs.every("quotes", schedule.quote_poll_interval_s, self._poll_quotes)
        jobs.every(
            "reconcile", schedule.reconcile_interval_s, reconcile,
            first_in_s=schedule.reconcile_interval_s,
        )  # fmt: skip
        jobs.every("equity", schedule.equity_snapshot_interval_s, self._snapshot_equity)
        if self.link is not None:
            jobs.every("heartbeat", self.settings.mqtt.heartbeat_interval_s, self._heartbeat)
        jobs.start()
        self._jobs = jobs

    def _make_venue(self, last: datetime | None) -> Venue | None:
        settings = self.settings
        if self._replay is None:
            try:
                return live_venue(settings, last, self._on_exchange_error)
            except ValueError as error:
                raise StartupFailed(EX_CONFIG, "market data", str(error)) from error
        times = replay_times(settings, self._replay.replay, last)
        if not times:
            return None
        return replay_venue(
            settings, self._replay.replay, times, self._replay.speed, resume_after=last
        )

    async def _reconcile(self, lock: asyncio.Lock) -> None:
        engine = self._engine
        assert engine is not None
        assert self._venue is not None
        async with lock:
            try:
                report = await engine.reconcile(self._venue.clock.now())
            except Exception:
                self._log.exception("reconciliation failed")
                return
        self.readiness.mark(
            "reconciled",
            bool(engine.reconciled),
            report.summary if not engine.reconciled else "reconciled",
        )

    async def _start_market(self) -> bool:
        """Check the symbols with the venue and reload the bar windows; False while the
        exchange cannot be reached (said plainly, once per attempt)."""
        engine, venue = self._engine, self._venue
        assert engine is not None
        assert venue is not None
        try:
            await engine.market.start(venue.clock.now())
        except ExchangeCallFailed as error:
            self._set_exchange(False, f"{engine.market.feed.name} unreachable: {error.kind}")
            self._log.error(
                "exchange unreachable: trading waits for it; retrying",
                exchange=engine.market.feed.name,
                kind=error.kind,
                detail=str(error)[:300],
            )
            return False
        except UnknownSymbols as error:
            raise StartupFailed(EX_CONFIG, "market data", str(error)) from error
        self._market_started = True
        self._set_exchange(True, "reachable")
        return True

    def _market_up(self) -> bool:
        return self._market_started

    async def _keep_connecting(self) -> None:
        delay = 5.0
        while not self._market_up():
            await asyncio.sleep(delay)
            if self._market_up():  # a tick got there first
                return
            try:
                if await self._start_market():
                    return
            except StartupFailed as failed:  # a symbol the venue no longer lists
                self._log.error("market data", reason=failed.reason)
            delay = min(delay * 2, MARKET_RETRY_MAX_S)

    def _venue_feed_name(self) -> str:
        return self._venue.feed.name if self._venue is not None else "?"

    async def _load_models(self, worker: InferenceWorker) -> None:
        settings, device, metrics = self.settings, self._device, self.metrics
        assert device is not None
        assert metrics is not None
        self.readiness.mark("model", False, "loading")
        self.notifier.extend_start(600)
        requests = warm_up_requests(
            settings.market.symbols, Timeframe(settings.market.timeframe),
            settings.market.context_bars, settings.forecast.horizon, settings.forecast.quantiles,
        )  # fmt: skip
        for slot in self._slots:
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
            self._log.info(
                "model ready", model=slot.name, device=str(device.device), mode=slot.mode,
                load_s=round(time.perf_counter() - began - warm, 3), warm_up_s=round(warm, 3),
                forced_eager=slot.compile_stats.forced_eager,
            )  # fmt: skip
        metrics.prepare_models((s.name, str(device.device), s.mode) for s in self._slots)
        self.readiness.mark("model", True, ", ".join(f"{s.name} ({s.mode})" for s in self._slots))

    # --- ticks and jobs ---------------------------------------------------------------------

    async def _tick(self, at: datetime) -> TickReport:
        engine, controller = self._engine, self._controller
        assert engine is not None
        assert controller is not None
        if not self._market_started:
            try:
                await self._start_market()  # windows reload from the ledger once it is back
            except StartupFailed as failed:
                self._log.error("market data", reason=failed.reason)
        report = await engine.tick(at)
        await controller.after_tick(report)
        return report

    def on_lateness(self, at: datetime, lateness_s: float, *, missed: bool) -> None:
        if self.metrics is not None:
            self.metrics.observe_lateness(lateness_s, missed=missed)

    def _after_tick_report(self, report: TickReport) -> None:
        self._last_report = report
        if self._engine is not None and self.metrics is not None:
            market = self._engine.market
            contiguous = {s: w.contiguous for s, w in market.windows.items()}
            self.metrics.observe_windows(market.missing, contiguous)
        if report.ready:
            self._set_exchange(True, "reachable")
        elif report.skipped and set(report.skipped.values()) == {"exchange_unavailable"}:
            self._set_exchange(False, f"{self._venue_feed_name()} unreachable")

    async def _poll_quotes(self) -> None:
        engine, venue, metrics = self._engine, self._venue, self.metrics
        if engine is None or venue is None or metrics is None:
            return
        now = venue.clock.now()
        max_age = timedelta(seconds=self.settings.market.max_quote_age_s)
        symbols = list(self.settings.market.symbols)
        quotes: dict[str, Quote | SkipReason] = {}
        if self.settings.market.add_latest:
            try:
                raw = await engine.market.feed.top_of_book(symbols)
            except ExchangeCallFailed as error:
                self._set_exchange(False, f"{engine.market.feed.name} unreachable: {error.kind}")
                self._quotes = dict.fromkeys(symbols, SkipReason.EXCHANGE_UNAVAILABLE)
                return
            self._set_exchange(True, "reachable")
            quotes = {s: check_quote(raw.get(s), s, now, max_age) for s in symbols}
        else:
            for symbol in symbols:
                last = engine.market.windows[symbol].last
                quotes[symbol] = (
                    check_quote(synthetic_quote(last), symbol, now, max_age)
                    if last is not None
                    else SkipReason.NO_QUOTE
                )
        self._quotes = quotes
        for symbol, quote in quotes.items():
            if isinstance(quote, Quote):
                metrics.observe_quote(symbol, quote, now)

    async def _snapshot_equity(self) -> None:
        """Positions marked at the latest quotes between ticks (metrics and a pnl event); the
        ledger keeps the equity each tick booked."""
        engine, metrics = self._engine, self.metrics
        if engine is None or metrics is None or self._venue is None:
            return
        marks: dict[str, Decimal] = {}
        for symbol, window in engine.market.windows.items():
            if window.last is not None:
                marks[symbol] = Decimal(repr(window.last.close))
        marks.update({s: q.mid for s, q in self._quotes.items() if isinstance(q, Quote)})
        portfolio = engine.portfolio
        try:
            equity = portfolio.equity(marks)
            unrealized = portfolio.unrealized_pnl(marks)
        except DomainError:
            return  # a position with no price yet: nothing is guessed
        drawdown = engine.risk.drawdown(equity)
        metrics.observe_book(portfolio, marks, equity, drawdown)
        if self.link is not None:
            self.link.publish(
                events.pnl(
                    self.settings.instance,
                    self._venue.clock.now(),
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

    async def _heartbeat(self) -> None:
        if self.link is None or self._venue is None:
            return
        verdict = self.readiness.evaluate()
        self._on_verdict(verdict)
        last = self._last_report.at.isoformat() if self._last_report else None
        self.link.publish(
            events.heartbeat(
                self.settings.instance,
                self._venue.clock.now(),
                ready=verdict.ready,
                not_ready=verdict.reasons(),
                uptime_s=round(time.monotonic() - self._started, 1),
                last_tick=last,
                trading_state=self._trading_state(),
            )
        )

    def _job_skipped(self, job: str) -> None:
        if self.metrics is not None:
            self.metrics.jobs_missed.labels(job=job).inc()

    # --- readiness --------------------------------------------------------------------------

    def _set_exchange(self, up: bool, detail: str) -> None:
        was = self._exchange
        if up and not was[0] and was[1] != NOT_CONTACTED:
            self._log.info("exchange reachable again", exchange=self._venue_feed_name())
        elif not up and was[0]:
            self._log.error("exchange unreachable", exchange=self._venue_feed_name(), why=detail)
        self._exchange = (up, detail)
        if self.metrics is not None:
            self.metrics.exchange_reachable.set(up)

    def _on_exchange_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.exchange_error(kind)

    def _data_check(self) -> tuple[bool, str]:
        venue, report = self._venue, self._last_report
        assert venue is not None
        problems: list[str] = []
        if report is None:
            if venue.kind == "replay":
                problems.append("no tick yet")
        else:
            # The data step's words where it has them ("gap: 12 of 16 bars in a row ...").
            status = self._engine.market.status if self._engine is not None else {}
            problems += [f"{s}: {status.get(s, r)}" for s, r in report.skipped.items()]
            schedule = self.settings.schedule
            allowed = Timeframe(self.settings.market.timeframe).duration + timedelta(
                seconds=schedule.settle_delay_s + schedule.misfire_grace_s
            )
            if venue.kind == "live" and venue.clock.now() - report.at > allowed:
                problems.append(f"no tick since {report.at.isoformat()}")
        if venue.kind == "live":
            for symbol in self.settings.market.symbols:
                quote = self._quotes.get(symbol)
                if quote is None:
                    problems.append(f"{symbol}: no quote yet")
                elif isinstance(quote, SkipReason):
                    problems.append(f"{symbol}: quote {quote}")
        unique = list(dict.fromkeys(problems))
        return (not unique, "; ".join(unique) or "fresh")

    def _state_check(self) -> tuple[bool, str]:
        engine = self._engine
        assert engine is not None
        status = engine.risk.status
        return (status.state is not TradingState.HALTED, f"{status.state}: {status.reason}")

    def _on_verdict(self, verdict: Verdict) -> None:
        if self.metrics is not None:
            self.metrics.ready.set(verdict.ready)

    # --- state, commands, reload ------------------------------------------------------------

    def _on_state(self, status: TradingStatus) -> None:
        if self.link is not None and self._phase == "ready":
            self.link.set_status(self._status_event("ready"))

    def _on_hangup(self) -> None:
        self._log.info("SIGHUP received: reloading the strategy and risk settings")
        if self._controller is None:
            self._log.warning("reload ignored: start-up is not finished")
            return
        self._background(self._reload_on_hangup(), "reload")

    async def _reload_on_hangup(self) -> None:
        await self._run_command("reload", "SIGHUP")

    def _on_reloaded(self, applied: list[str], needs_restart: list[str]) -> None:
        if self.link is not None and self._venue is not None:
            self.link.publish(
                events.command_result(
                    self.settings.instance,
                    self._venue.clock.now(),
                    "reload",
                    "applied",
                    f"applied: {applied}; needs a restart: {needs_restart}",
                )
            )

    async def _run_command(self, command: str, by: str) -> str:
        if self._controller is None:
            return "not ready: start-up is not finished"
        try:
            return await self._controller.run(command, by)
        except Exception as error:
            self._log.exception("command failed", command=command)
            return f"failed: {type(error).__name__}"

    async def _on_command(self, payload: bytes) -> None:
        """A message on the cmd topic: verified, then carried out between ticks."""
        mqtt, metrics = self.settings.mqtt, self.metrics
        assert mqtt.command_secret is not None
        assert metrics is not None
        verifier = self._verifier
        if verifier is None:
            verifier = self._verifier = CommandVerifier(
                mqtt.command_secret.get_secret_value().encode(), mqtt.command_window_s
            )
        verdict = verifier.verify(payload, time.time())
        at = self._venue.clock.now() if self._venue is not None else datetime.now(UTC)
        if isinstance(verdict, Refusal):
            metrics.command(verdict.command, verdict.result)
            self._log.warning(
                "command refused", command=verdict.command, result=verdict.result,
                reason=verdict.reason,
            )  # fmt: skip
            result, reason, command = verdict.result, verdict.reason, verdict.command
        else:
            reason = await self._run_command(verdict.name, "mqtt command")
            result = "failed" if reason.startswith(("failed", "not ready")) else "accepted"
            metrics.command(verdict.name, result)
            command = verdict.name
        if self.link is not None:
            self.link.publish(
                events.command_result(self.settings.instance, at, command, result, reason)
            )

    # --- stopping ---------------------------------------------------------------------------

    async def _shut_down(self, stack: AsyncExitStack) -> None:
        self._phase = "stopping"
        self.readiness.mark("started", False, "stopping")
        self.notifier.stopping()
        if self._jobs is not None:
            await self._jobs.stop(self.settings.schedule.shutdown_deadline_s)
        await self._apply_shutdown_stance()
        await self._stop_background("stopped")
        await stack.aclose()  # engine, feed, ledger (checkpointed), endpoint: newest first
        self._log.info("stopped", exit_code=0)

    async def _stop_background(self, reason: str) -> None:
        """Stop the background tasks; the MQTT link last, after its goodbye status."""
        for task in self._tasks:
            if task.get_name() != "mqtt":
                task.cancel()
        if self.link is not None:
            await self.link.close(self._status_event("offline", reason=reason))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _apply_shutdown_stance(self) -> None:
        engine, venue, controller = self._engine, self._venue, self._controller
        if engine is None or venue is None or controller is None:
            return
        orders = engine.broker.open_orders()
        if not orders:
            return
        if self.settings.broker.on_shutdown == "keep":
            self._log.info("open orders kept", count=len(orders))
            return
        now = venue.clock.now()
        async with controller.lock:
            cancelled: list[Order] = []
            left: list[Order] = []
            for order in orders:
                try:
                    execution = await engine.broker.cancel(order, now)
                except Exception as error:
                    self._log.error("cancel failed", order=order.client_order_id, error=repr(error))
                    continue
                if execution is None:
                    continue
                # Fills found while cancelling are booked by the next start's reconciliation,
                # with everything else the venue did meanwhile; only the status is noted now.
                (left if execution.fills else cancelled).append(execution.order)
            await engine.ledger.record_orders(cancelled, now, "cancelled on shutdown")
        self._log.info("open orders cancelled", count=len(cancelled), filled_meanwhile=len(left))

    async def _close_ledger(self, database: Database) -> None:
        try:
            # Everything in the main file: the WAL is emptied (a copy of the file is whole).
            await database.run(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        except Exception:
            self._log.exception("ledger checkpoint failed")
        await database.close()
        self._log.info("ledger flushed", path=str(database.path))

    # --- what we say about ourselves --------------------------------------------------------

    def _trading_state(self) -> str | None:
        return str(self._engine.risk.state) if self._engine is not None else None

    def _model_fields(self) -> dict[str, str | None]:
        settings, device = self.settings, self._device
        fields: dict[str, str | None] = {
            "model": settings.forecast.model,
            "model_mode": self._slots[0].mode if self._slots and self._slots[0].model else None,
        }
        if device is not None:
            fields |= {"device": str(device.device), "device_fallback": device.fallback}
        return fields

    def _status_text(self) -> str:
        fields = self._model_fields()
        engine = self._engine
        state = f"{engine.risk.state} ({engine.risk.status.reason})" if engine else "?"
        return (
            f"{self._phase}: {len(self.settings.market.symbols)} symbols "
            f"{self.settings.market.timeframe}, {fields['model']} {fields.get('model_mode')} on "
            f"{fields.get('device')}, {self.settings.broker.mode}, trading {state}"
        )

    def _status_event(self, state: str, **extra: Any) -> events.Event:
        settings = self.settings
        engine = self._engine
        fields: dict[str, Any] = {
            "version": __version__,
            "pid": os.getpid(),
            "venue": self._venue.kind if self._venue else ("replay" if self._replay else "live"),
            "exchange": settings.exchange.id,
            "broker_mode": settings.broker.mode,
            "symbols": list(settings.market.symbols),
            "timeframe": settings.market.timeframe,
            "quote_source": "real" if settings.market.add_latest else "synthetic",
            "trading_state": str(engine.risk.state) if engine else None,
            "trading_reason": engine.risk.status.reason if engine else None,
        }
        fields |= self._model_fields()
        at = self._venue.clock.now() if self._venue else datetime.now(UTC)
        return events.status(settings.instance, at, state, **(fields | extra))

    def _runtime(self, model: str) -> str:
        forecast = self.settings.forecast
        return "eager" if model == "baseline" else str(getattr(forecast, model).runtime)

    def _log_start(self) -> None:
        settings = self.settings
        model = settings.forecast.model
        runtime = self._runtime(model)
        self._log.info(
            "starting",
            version=__version__,
            pid=os.getpid(),
            venue="replay" if self._replay else "live",
            broker_mode=settings.broker.mode,
            exchange=settings.exchange.id,
            symbols=settings.market.symbols,
            timeframe=settings.market.timeframe,
            model=model,
            model_mode=runtime,
            device_requested=settings.forecast.device,
            quote_source="real" if settings.market.add_latest else "synthetic",
            config_file=str(self._loaded.config_file) if self._loaded.config_file else None,
        )
