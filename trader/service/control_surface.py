"""How the outside world steers a running daemon: SIGTERM/SIGINT stop it, SIGHUP reloads the
strategy and risk settings, and signed MQTT commands (pause, resume, flatten, reload) run
between ticks through the `Controller`. Every command's result is published."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from structlog.typing import FilteringBoundLogger as Logger

from trader.service.parts import Parts
from trader.telemetry import events
from trader.telemetry.commands import CommandVerifier, Refusal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ControlSurface:
    def __init__(self, parts: Parts, request_stop: Callable[[str], None], log: Logger) -> None:
        self._parts = parts
        self._request_stop = request_stop
        self._log = log
        self._verifier: CommandVerifier | None = None

    @contextmanager
    def signals(self) -> Iterator[None]:
        """The signal handlers, on the running loop, for as long as the daemon runs."""
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self._request_stop, signum.name)
        loop.add_signal_handler(signal.SIGHUP, self._on_hangup)
        try:
            yield
        finally:
            for signum in (*STOP_SIGNALS, signal.SIGHUP):
                loop.remove_signal_handler(signum)

    def _on_hangup(self) -> None:
        self._log.info("SIGHUP received: reloading the strategy and risk settings")
        if self._parts.controller is None:
            self._log.warning("reload ignored: start-up is not finished")
            return
        self._parts.background(self._reload(), "reload")

    async def _reload(self) -> None:
        await self.run("reload", "SIGHUP")

    def on_reloaded(self, applied: list[str], needs_restart: list[str]) -> None:
        parts = self._parts
        if parts.metrics is not None and parts.engine is not None:
            parts.metrics.set_risk_limits(parts.engine.risk.settings)
        if parts.link is not None and parts.venue is not None:
            parts.link.publish(
                events.command_result(
                    parts.settings.instance,
                    parts.venue.clock.now(),
                    "reload",
                    "applied",
                    f"applied: {applied}; needs a restart: {needs_restart}",
                )
            )

    async def run(self, command: str, by: str) -> str:
        """Carry out `command` between ticks; what happened, in words."""
        if self._parts.controller is None:
            return "not ready: start-up is not finished"
        try:
            return await self._parts.controller.run(command, by)
        except Exception as error:
            self._log.exception("command failed", command=command)
            return f"failed: {type(error).__name__}"

    async def on_command(self, payload: bytes) -> None:
        """A message on the cmd topic: verified, then carried out between ticks."""
        parts = self._parts
        mqtt, metrics = parts.settings.mqtt, parts.metrics
        assert mqtt.command_secret is not None
        assert metrics is not None
        verifier = self._verifier
        if verifier is None:
            verifier = self._verifier = CommandVerifier(
                mqtt.command_secret.get_secret_value().encode(), mqtt.command_window_s
            )
        verdict = verifier.verify(payload, time.time())
        at = parts.venue.clock.now() if parts.venue is not None else datetime.now(UTC)
        if isinstance(verdict, Refusal):
            metrics.command(verdict.command, verdict.result)
            self._log.warning(
                "command refused", command=verdict.command, result=verdict.result,
                reason=verdict.reason,
            )  # fmt: skip
            result, reason, command = verdict.result, verdict.reason, verdict.command
        else:
            reason = await self.run(verdict.name, "mqtt command")
            result = "failed" if reason.startswith(("failed", "not ready")) else "accepted"
            metrics.command(verdict.name, result)
            command = verdict.name
        if parts.link is not None:
            parts.link.publish(
                events.command_result(parts.settings.instance, at, command, result, reason)
            )
