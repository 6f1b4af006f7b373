"""Telemetry comes up first, so that every later start-up step is visible: the metrics and
health endpoint (/healthz answers from here on, /readyz says which step is under way), the
MQTT link with its retained status, the systemd watchdog and the event-loop lag monitor."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any

from prometheus_client import CollectorRegistry
from structlog.typing import FilteringBoundLogger as Logger

from trader.daemon.loop_lag import LoopLagMonitor
from trader.exit_codes import EX_UNAVAILABLE
from trader.runner import model_names
from trader.service.health import publish_verdict
from trader.service.parts import Parts, StartupFailed
from trader.service.status import publish_status
from trader.telemetry.calendar_metrics import CalendarMetrics, configured_calendars
from trader.telemetry.fill_cost_metrics import CostModel
from trader.telemetry.http import HttpEndpoint
from trader.telemetry.metrics import Metrics
from trader.telemetry.mqtt import MqttLink
from trader.telemetry.skill_metrics import SkillMetrics


async def start_telemetry(
    parts: Parts,
    stack: AsyncExitStack,
    on_command: Callable[[bytes], Coroutine[Any, Any, None]],
    log: Logger,
) -> None:
    settings = parts.settings
    parts.metrics = metrics = Metrics(
        CollectorRegistry(),
        settings.market.symbols,
        broker_mode=settings.broker.mode,
        simulated_clock=parts.replay is not None,  # the clock itself comes with the venue
    )
    metrics.set_risk_limits(settings.risk)
    metrics.fill_costs.use_model(CostModel.of(settings))  # what the fills' costs compare with
    # The engine's settings once it exists: a reload swaps them (the timeframe, the quote age).
    metrics.schedule.use_settings(lambda: parts.engine.settings if parts.engine else parts.settings)
    parts.skill_metrics = SkillMetrics(
        metrics.registry, settings.market.symbols, model_names(settings)
    )
    parts.calendar_metrics = CalendarMetrics(
        metrics.registry,
        configured_calendars(settings.market)
        if parts.replay is None
        else [end.calendar for end in parts.replay.replay.calendars.known_ends()],
    )
    parts.readiness.mark("started", False, "starting")
    if settings.metrics.enabled:
        endpoint = parts.endpoint = HttpEndpoint(
            metrics.registry,
            parts.readiness,
            host=settings.metrics.host,
            port=settings.metrics.port,
            idle_timeout_s=settings.metrics.idle_timeout_s,
            on_verdict=lambda verdict: publish_verdict(parts, verdict),
        )
        try:
            await endpoint.start()
        except OSError as error:
            raise StartupFailed(
                EX_UNAVAILABLE,
                "metrics endpoint",
                f"cannot listen on {settings.metrics.host}:{settings.metrics.port} "
                f"({error.strerror or error}); set metrics.port (0: any free port) or "
                "metrics.enabled = false",
            ) from error
        stack.push_async_callback(endpoint.stop)
        log.info(
            "serving metrics",
            url=f"http://{settings.metrics.host}:{endpoint.port}/metrics",
            port=endpoint.port,
        )
    if settings.mqtt.enabled:
        parts.link = MqttLink(
            settings.mqtt,
            settings.instance,
            on_connected=metrics.mqtt_connected.set,
            on_dropped=metrics.events_dropped,
            on_command=on_command,
        )
        publish_status(parts, "starting")
        parts.background(parts.link.run(), "mqtt")
    parts.background(parts.notifier.watchdog(), "watchdog")
    monitor = LoopLagMonitor(on_lag=metrics.loop_lag.set)
    parts.background(monitor.run(), "loop lag")
