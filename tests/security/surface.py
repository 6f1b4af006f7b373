"""The daemon's real command handler (`ControlSurface.on_command`) with its real parts: settings,
ledger, engine on recorded bars, controller, metrics and an MQTT link that is never connected
(what it would publish stays in its queue, where the tests read the answers)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from tests.recorded import SOLUSDT_1H
from trader.clock import SimulatedClock
from trader.config import LoadedSettings
from trader.config.schema import Settings
from trader.daemon.control import Controller
from trader.daemon.notify import SystemdNotifier
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.ledger.nonces import CommandNonces
from trader.logging import get_logger
from trader.market.quotes import FixedSpread
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.runner import build_engine, tick_times
from trader.service.control_surface import ControlSurface
from trader.service.parts import Parts, StopRequest
from trader.telemetry.commands import MAX_NONCES
from trader.telemetry.metrics import Metrics
from trader.telemetry.mqtt import MqttLink

SECRET = "a-command-secret-shared-by-two-daemons"
SYMBOL = "SOL/USDT"


def settings(ledger: Path, instance: str = "one", **mqtt: Any) -> Settings:
    return Settings(
        instance=instance,
        mqtt={"enabled": True, "commands_enabled": True, "command_secret": SECRET,
              "queue_size": 1_000_000} | mqtt,
        market={"symbols": [SYMBOL], "context_bars": 32},
        forecast={"model": "baseline", "baseline_lookback": 32},
        ledger={"path": ledger},
    )  # fmt: skip


@dataclass
class Surface:
    control: ControlSurface
    parts: Parts
    link: MqttLink
    database: Database

    @property
    def topic(self) -> str:
        return self.link.topic("cmd")

    def answers(self, since: int = 0) -> list[dict[str, Any]]:
        """The bodies published on cmd/result, oldest first (from the `since`-th event)."""
        events = self.link.queued()[since:]  # never connected: everything stays queued
        return [json.loads(event.payload()) for event in events if event.topic == "cmd/result"]

    def published(self) -> int:
        """How many events were published so far."""
        return len(self.link.queued())

    def counted(self) -> float:
        """Every command counted, whatever its label and result."""
        assert self.parts.metrics is not None
        return sum(
            sample.value
            for family in self.parts.metrics.commands.collect()
            for sample in family.samples
            if sample.name == "trader_mqtt_commands_total"
        )

    async def close(self) -> None:
        assert self.parts.engine is not None
        self.parts.engine.close()
        await self.database.close()


async def open_surface(
    ledger: Path,
    instance: str = "one",
    *,
    durable: bool = True,
    monotonic: Callable[[], float] = time.monotonic,
    **mqtt: Any,
) -> Surface:
    """A daemon's command handler on `ledger`: opening it again on the same ledger is what a
    restart does (nothing else survives but the ledger). `durable=False`: SQLite without the
    fsyncs, for a fuzzer's thousands of writes. `monotonic`: the flood limits' clock; `mqtt`:
    settings of the MQTT section (the rate, the refusal interval)."""
    chosen = settings(ledger, instance, **mqtt)
    loaded = LoadedSettings(chosen, {}, None, None, None)
    parts = Parts(loaded, chosen, None, SystemdNotifier(None))
    parts.metrics = Metrics(CollectorRegistry(), chosen.market.symbols)
    recorded = read_recording(SOLUSDT_1H)
    recordings = {SYMBOL: Recording(SYMBOL, recorded.timeframe, recorded.rows[:64], SOLUSDT_1H)}
    first = tick_times(recordings, 32)[0]
    clock = SimulatedClock(first)
    database = await Database.open(ledger, durable=durable)
    feed = ReplayMarketData(recordings, clock, FixedSpread(5))
    parts.engine = await build_engine(
        chosen, feed, database, first, forecasters=[BaselineForecaster(32)]
    )
    control = ControlSurface(parts, StopRequest(), get_logger("test.security"), monotonic)
    parts.link = link = MqttLink(
        chosen.mqtt,
        instance,
        on_dropped=parts.metrics.events_dropped,
        on_command=control.on_command,
    )
    parts.nonces = CommandNonces(database, MAX_NONCES)
    parts.controller = Controller(
        parts.engine, asyncio.Lock(), clock, lambda: chosen, control.on_reloaded
    )
    return Surface(control, parts, link, database)
