"""The daemon, put together from its parts (the package docstring tells its life):

refuse a live start without every opt-in -> signals -> settings -> telemetry ->
start-up steps -> ticks and jobs until a stop -> shutdown
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, suppress
from datetime import UTC, datetime

from trader.config import LoadedSettings
from trader.config.loader import load_from_environment
from trader.config.schema import Settings
from trader.config.strict import config_refusal
from trader.daemon.notify import SystemdNotifier
from trader.daemon.reload import SettingsSource
from trader.exit_codes import EX_CONFIG, EX_IOERR, EX_SOFTWARE
from trader.forecast.provenance import log_origins
from trader.logging import get_logger
from trader.runner import model_names, replay_settings
from trader.service.control_surface import ControlSurface
from trader.service.exchange import ExchangeConnection
from trader.service.parts import Parts, ReplayRequest, StartupFailed, StopRequest
from trader.service.promotion import say_promotion
from trader.service.shutdown import shut_down, stop_background
from trader.service.startup import Startup
from trader.service.status import log_start, publish_status
from trader.service.telemetry import start_telemetry
from trader.service.ticking import Ticking


class Service:
    def __init__(
        self,
        loaded: LoadedSettings,
        *,
        replay: ReplayRequest | None = None,
        reload_source: SettingsSource | None = None,
    ) -> None:
        self._log = log = get_logger("trader.service", instance=loaded.settings.instance)
        self.request_stop = StopRequest()
        self.write_failure: str | None = None  # a replay stopped: its ledger cannot be written
        self.parts = parts = Parts(
            loaded, loaded.settings, replay, SystemdNotifier.from_environment()
        )
        self._control = ControlSurface(parts, self.request_stop, log)
        exchange = ExchangeConnection(parts, log)
        self._ticking = Ticking(parts, exchange, log)
        self._startup = Startup(
            parts, exchange, self._ticking, self._control,
            reload_source or self._reload_from_sources, log,
        )  # fmt: skip

    async def run(self) -> int:
        """The daemon's whole life; its exit status."""
        # Live trading needs three explicit opt-ins (the mode, the confirmation, keys from the
        # secrets directory or the environment); another instance holding the ledger or a
        # symbol is found when the broker is built.
        loaded = self.parts.loaded
        refusal = config_refusal(self.parts.settings, loaded.origins, loaded.secrets_in_files)
        if refusal is not None:
            self._log.error("refusing to start", reason=refusal)
            return EX_CONFIG
        # Live without `trader promote`'s record: allowed, said once, first.
        say_promotion(self.parts.settings, datetime.now(UTC), self._log)
        for key, where in sorted(loaded.secrets_in_files.items()):
            self._log.warning(
                "a secret is in a config file", key=key, file=where,
                fix="keep secrets in the secrets directory or the environment",
            )  # fmt: skip
        try:
            with self._control.signals():
                async with AsyncExitStack() as stack:
                    return await self._live(stack)
        finally:
            self.parts.notifier.close()

    async def _live(self, stack: AsyncExitStack) -> int:
        parts = self.parts
        try:
            parts.settings = self._prepare(parts.loaded.settings)
        except ValueError as error:
            self._log.error("refusing to start", reason=str(error))
            return EX_CONFIG
        # Where the weights came from (a random base, a verdict that did not help), said first.
        log_origins(model_names(parts.settings), parts.settings.forecast)
        log_start(parts, self._log)
        try:
            await start_telemetry(parts, stack, self._control.on_command, self._log)
        except StartupFailed as failed:
            self._log.error("cannot start", step=failed.step, reason=failed.reason)
            return failed.code
        try:
            started = await self._start_up(stack)
        except StartupFailed as failed:
            self._log.error("cannot start", step=failed.step, reason=failed.reason)
            if failed.code == EX_IOERR:  # a ledger its disk has no room for: said first
                self.write_failure = failed.reason
            parts.phase = f"failed: {failed.step}"
            parts.notifier.status(f"cannot start ({failed.step}): {failed.reason}")
            await stop_background(parts, f"cannot start: {failed.reason}")
            return failed.code
        if started and parts.ticks is not None:  # None: a replay with nothing left to run
            await self._serve()
        code = EX_IOERR if self.write_failure is not None else 0
        await shut_down(parts, stack, self._log, code)
        return code

    async def _start_up(self, stack: AsyncExitStack) -> bool:
        """The start-up steps, unless a stop signal comes first (False)."""
        starting = asyncio.create_task(self._startup.run(stack))
        stopping = asyncio.create_task(self.request_stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            with suppress(asyncio.CancelledError):
                await starting
            self._log.info("stopping", signal=self.request_stop.reason, during="start-up")
            return False
        try:
            starting.result()
        except StartupFailed:
            raise
        except Exception as error:  # a bug, or something nobody foresaw: say it, exit 70
            self._log.exception("start-up failed unexpectedly", step=self.parts.phase)
            raise StartupFailed(EX_SOFTWARE, self.parts.phase, repr(error)[:300]) from error
        return True

    async def _serve(self) -> None:
        """Tick until a stop signal, or until a replay runs out of bars."""
        parts = self.parts
        assert parts.ticks is not None
        assert parts.venue is not None
        if parts.replay is not None and parts.engine is not None:
            # A replay stops at its first refused write: nobody is there to free the space.
            parts.engine.write_outage.on_start = self._stop_on_write_failure
        ticking = asyncio.create_task(
            parts.ticks.run(
                self.request_stop.event,
                after=parts.venue.resume_after,
                max_ticks=parts.replay.max_ticks if parts.replay else None,
            )
        )
        stopping = asyncio.create_task(self.request_stop.wait())
        await asyncio.wait({ticking, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not self.request_stop.is_set():  # the ticks ran out (a replay's end), or failed
            if ticking.exception() is not None:
                self._log.error("the tick loop failed", error=repr(ticking.exception()))
            else:
                self._log.info(
                    "replay finished" if parts.venue.kind == "replay" else "ticks finished",
                    ticks=ticking.result(),
                    last=parts.ticks.last.isoformat() if parts.ticks.last else None,
                    equity=str(parts.last_report.equity) if parts.last_report else None,
                )
            self.request_stop("end of replay")
            return
        self._log.info("stopping", signal=self.request_stop.reason)
        parts.phase = "stopping"
        parts.notifier.stopping(f"stopping ({self.request_stop.reason})")
        publish_status(parts, "stopping")
        deadline = parts.settings.schedule.shutdown_deadline_s
        _, late = await asyncio.wait({ticking}, timeout=deadline)
        if late:
            # Crash-only: a tick is one ledger transaction, whole or absent, and re-running it
            # never places an order twice. Abandoning it is safe; waiting forever is not.
            self._log.error("tick abandoned at the shutdown deadline", deadline_s=deadline)
            ticking.cancel()
            with suppress(asyncio.CancelledError):
                await ticking

    def _stop_on_write_failure(self, reason: str) -> None:
        self.write_failure = reason
        self.request_stop(reason)

    def _prepare(self, settings: Settings) -> Settings:
        """The settings as this run uses them (a replay: its recordings' symbols, timeframe)."""
        replay = self.parts.replay
        return settings if replay is None else replay_settings(settings, replay.replay.recordings)

    def _reload_from_sources(self) -> Settings:
        return self._prepare(load_from_environment(self.parts.loaded.config_file).settings)
