"""The engine's telemetry hooks: each tick and each trading-state change go to the metrics and,
as events, to MQTT. They only count and enqueue (nothing here waits on a network), and a
failure in them is logged, never passed back into the tick."""

from __future__ import annotations

from collections.abc import Callable

from trader.engine.report import TickReport
from trader.logging import get_logger
from trader.risk.state import TradingStatus
from trader.telemetry.events import tick_events
from trader.telemetry.metrics import Metrics
from trader.telemetry.mqtt import MqttLink


class TelemetryHooks:
    def __init__(
        self,
        metrics: Metrics,
        instance: str,
        link: MqttLink | None,
        *,
        on_tick: Callable[[TickReport], None] = lambda report: None,
        on_state: Callable[[TradingStatus], None] = lambda status: None,
    ) -> None:
        self.metrics = metrics
        self.instance = instance
        self.link = link
        self._on_tick = on_tick
        self._on_state = on_state
        self._log = get_logger("trader.telemetry")

    def on_tick(self, report: TickReport) -> None:
        try:
            self.metrics.observe_tick(report)
            self.metrics.count_write_failures(report.write_failures)
            if self.link is not None:
                for event in tick_events(self.instance, report):
                    self.link.publish(event)
            self._on_tick(report)
        except Exception:
            self._log.exception("telemetry failed for a tick", at=report.at.isoformat())

    def on_state(self, status: TradingStatus) -> None:
        try:
            self.metrics.set_state(status)
            self._on_state(status)
        except Exception:
            self._log.exception("telemetry failed for a state change")
