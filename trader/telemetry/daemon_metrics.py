"""The metrics of the daemon itself, apart from what it trades: the process, the event loop,
the exchange and MQTT links, commands, the periodic tasks, readiness, the clock, the device and
the build. `metrics.Metrics` adds the ticks, the models, the market and the book to these."""

from __future__ import annotations

import platform
from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Info,
    PlatformCollector,
    ProcessCollector,
)

from trader import __version__
from trader.forecast.device_choice import torch_build
from trader.telemetry.labels import (
    COMMAND_RESULTS,
    COMMANDS,
    DEVICE_KEYS,
    EVENT_QUEUES,
    EXCHANGE_ERROR_KINDS,
    MODEL_INFO_KEYS,
    TASKS,
)


class DaemonMetrics:
    def __init__(
        self, registry: CollectorRegistry, *, broker_mode: str, simulated_clock: bool
    ) -> None:
        self.registry = r = registry
        self.broker_mode = broker_mode
        ProcessCollector(registry=r)  # process_resident_memory_bytes and friends
        PlatformCollector(registry=r)
        self.loop_lag = Gauge(
            "trader_event_loop_lag_seconds", "Worst event-loop delay over the last few seconds",
            registry=r,
        )  # fmt: skip
        self.exchange_errors = Counter(
            "trader_exchange_errors_total", "Failed exchange calls, by kind", ["kind"], registry=r
        )
        self.exchange_reachable = Gauge(
            "trader_exchange_reachable", "1 when the last exchange call succeeded", registry=r
        )
        self.mqtt_connected = Gauge(
            "trader_mqtt_connected", "1 while connected to the MQTT broker", registry=r
        )
        self.mqtt_dropped = Counter(
            "trader_mqtt_dropped_total",
            "Events dropped (queue full or broker away), by queue: trading (orders, fills, P&L, "
            "decisions, status) or other (forecasts, scores, heartbeats, command answers)",
            ["queue"], registry=r,
        )  # fmt: skip
        self.trade_stream_connected = Gauge(
            "trader_trade_stream_connected",
            "1 while the venue's trade-updates stream is connected (Alpaca); 0: polling alone",
            registry=r,
        )  # fmt: skip
        self.trade_stream_drops = Counter(
            "trader_trade_stream_drops_total", "Times the trade-updates stream dropped",
            registry=r,
        )  # fmt: skip
        self.commands = Counter(
            "trader_mqtt_commands_total", "Commands received on the cmd topic, by result",
            ["command", "result"], registry=r,
        )  # fmt: skip
        self.jobs_missed = Counter(
            "trader_jobs_missed_total", "Periodic tasks skipped (still running or too late)",
            ["task"], registry=r,
        )  # fmt: skip
        self.ready = Gauge("trader_ready", "1 when /readyz says ready to trade", registry=r)
        self.ledger_write_failures = Counter(
            "trader_ledger_write_failures_total", "Writes the ledger's disk refused (full, "
            "failing, read-only): trading halts until one succeeds", registry=r,
        )  # fmt: skip
        self.ledger_writable = Gauge(
            "trader_ledger_writable", "0 from a tick whose ledger writes were refused to the "
            "next tick whose writes all succeed (trading halted meanwhile), else 1", registry=r,
        )  # fmt: skip
        self.clock_simulated = Gauge(
            "trader_clock_simulated", "1 on a simulated clock (trader run --replay), 0 live",
            registry=r,
        )  # fmt: skip
        self.device_info = Info(
            "trader_device", "Where the models run and why (see forecast.device)", registry=r
        )
        self.build_info = Info(
            "trader_build", "Version of trader, its runtime, and paper or live", registry=r
        )
        self.model_info = Gauge(
            "trader_model_info", "1 for each model's weights, labelled with where they came "
            "from: origin (finetuned, random, published, unknown; none: the baseline), base, "
            "revision, the "
            "fine-tuning verdict, the data's digest and the steps", MODEL_INFO_KEYS, registry=r,
        )  # fmt: skip
        for kind in EXCHANGE_ERROR_KINDS:
            self.exchange_errors.labels(kind)
        for command in COMMANDS:
            for result in COMMAND_RESULTS:
                self.commands.labels(command, result)
        for task in TASKS:
            self.jobs_missed.labels(task)
        for queue in EVENT_QUEUES:
            self.mqtt_dropped.labels(queue)
        self.clock_simulated.set(simulated_clock)
        self.ledger_writable.set(1)
        self.device_info.info(dict.fromkeys(DEVICE_KEYS, ""))
        self.build_info.info(build_labels() | {"broker_mode": broker_mode})

    def describe_device(self, description: Mapping[str, str | None]) -> None:
        """`DeviceChoice.describe()` as labels; a value that is None (no fallback) is ""."""
        labels = dict.fromkeys(DEVICE_KEYS, "")
        labels.update({k: "" if v is None else str(v) for k, v in description.items()})
        self.device_info.info(labels)

    def describe_model(self, labels: Mapping[str, str]) -> None:
        """`forecast.provenance.Origin.labels` of a loaded model's weights."""
        self.model_info.labels(*(labels.get(k, "") for k in MODEL_INFO_KEYS)).set(1)

    def exchange_error(self, kind: str) -> None:
        known = kind if kind in EXCHANGE_ERROR_KINDS else "exchange_error"
        self.exchange_errors.labels(known).inc()

    def count_write_failures(self, refused: int) -> None:
        """A tick's refused writes: a tick with none ends an outage (`engine.write_outage`)."""
        self.ledger_writable.set(refused == 0)
        if refused:
            self.ledger_write_failures.inc(refused)

    def job_missed(self, task: str) -> None:
        self.jobs_missed.labels(task).inc()

    def events_dropped(self, queue: str, count: int) -> None:
        self.mqtt_dropped.labels(queue).inc(count)

    def command(self, command: str, result: str) -> None:
        self.commands.labels(command if command in COMMANDS else "invalid", result).inc()


def build_labels() -> dict[str, str]:
    torch, cuda = torch_build()  # a baseline daemon never loads torch
    return {
        "version": __version__, "python": platform.python_version(), "torch": torch,
        "cuda": cuda or "",
    }  # fmt: skip
