"""How the outside world steers a running daemon: SIGTERM/SIGINT stop it, SIGHUP reloads the
strategy and risk settings, and signed MQTT commands (pause, resume, flatten, reload) run
between ticks through the `Controller`. Every payload on the command topic is counted, whatever
it holds; past the rate (`telemetry/flood.py`) it is refused unread. A command carried out is
answered and logged; refusals are answered and logged once per kind and interval, the next
line saying how many were held back, so a flood costs neither the log nor the event queue."""

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
from trader.telemetry.flood import Throttle, TokenBucket
from trader.telemetry.mqtt import base_topic

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ControlSurface:
    def __init__(
        self,
        parts: Parts,
        request_stop: Callable[[str], None],
        log: Logger,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._parts = parts
        self._request_stop = request_stop
        self._log = log
        self._verifier_made: CommandVerifier | None = None
        mqtt = parts.settings.mqtt
        self._monotonic = monotonic  # the flood limits' clock: a wall-clock step moves neither
        self._bucket = TokenBucket(mqtt.command_rate_per_s, mqtt.command_burst)
        self._refusals = Throttle(mqtt.command_refusal_interval_s)

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
        """A message on the cmd topic, whatever it holds: counted; past the rate refused unread;
        one that passes every check is carried out between ticks. Each is answered on
        cmd/result, a refusal only if none of its kind was this interval. Nothing a payload
        does can end this without a count."""
        if not self._bucket.take(self._monotonic()):
            bucket = self._bucket
            command, result = "invalid", "rate_limited"
            reason = f"over {bucket.rate_per_s:g} a second (burst {bucket.burst}): not read"
        else:
            try:
                command, result, reason = await self._obey(payload)
            except Exception as error:
                self._log.exception("command handling failed", error=type(error).__name__)
                command, result = "invalid", "error"
                reason = f"not handled: {type(error).__name__}"
        parts = self._parts
        if parts.metrics is not None:
            parts.metrics.command(command, result)
        if result not in {"accepted", "failed"}:
            held = self._refusals.due(result, self._monotonic())
            if held is None:
                return  # counted: one of its kind was answered and logged this interval
            if held:
                reason += f" ({held} more refused as {result} since the last answer)"
            self._log.warning(
                "command refused", command=command, result=result, reason=reason, held_back=held
            )
        if parts.link is not None:
            at = parts.venue.clock.now() if parts.venue is not None else datetime.now(UTC)
            parts.link.publish(
                events.command_result(parts.settings.instance, at, command, result, reason)
            )

    async def _obey(self, payload: bytes) -> tuple[str, str, str]:
        """(command label, result, reason) of one payload."""
        parts, now = self._parts, time.time()
        checked = self._verifier().check(payload, now)
        if isinstance(checked, Refusal):
            return checked.command, checked.result, checked.reason
        if parts.controller is None or parts.nonces is None:  # the nonce stays unspent
            return checked.label, "failed", "not ready: start-up is not finished"
        verdict = await self._verifier().admit(checked, now, parts.nonces)
        if isinstance(verdict, Refusal):
            return verdict.command, verdict.result, verdict.reason
        reason = await self.run(verdict.name, "mqtt command")
        result = "failed" if reason.startswith(("failed", "not ready")) else "accepted"
        return verdict.name, result, reason

    def _verifier(self) -> CommandVerifier:
        if self._verifier_made is None:
            settings = self._parts.settings
            secret = settings.mqtt.command_secret
            if secret is None:  # the settings refuse commands without a secret
                raise ValueError("commands need mqtt.command_secret")
            self._verifier_made = CommandVerifier(
                secret.get_secret_value().encode(),
                settings.mqtt.command_window_s,
                base_topic(settings.mqtt, settings.instance) + "/cmd",
            )
        return self._verifier_made
