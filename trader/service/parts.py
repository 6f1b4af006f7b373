"""What the daemon is made of, as start-up builds it, and the request to stop.

Start-up fills `Parts` step by step; the jobs, the health checks, the status and the shutdown
read whatever exists so far (a stop during start-up shuts down only what was started)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from trader.config import LoadedSettings
from trader.config.schema import Settings
from trader.daemon.control import Controller
from trader.daemon.inference import ModelSlot
from trader.daemon.jobs import WallJobs
from trader.daemon.notify import SystemdNotifier
from trader.daemon.skill import LiveSkill
from trader.daemon.ticks import TickLoop
from trader.domain import Quote
from trader.engine.pipeline import Engine
from trader.engine.report import TickReport
from trader.forecast.device_choice import DeviceChoice
from trader.ledger.nonces import CommandNonces
from trader.market.hygiene import SkipReason
from trader.market.replay_calendars import ReplayCalendars
from trader.runner import Venue
from trader.telemetry.calendar_metrics import CalendarMetrics
from trader.telemetry.http import HttpEndpoint
from trader.telemetry.metrics import Metrics
from trader.telemetry.mqtt import MqttLink
from trader.telemetry.readiness import Readiness
from trader.telemetry.skill_metrics import SkillMetrics


@dataclass(frozen=True)
class ReplayRequest:
    """`trader run --replay`: recorded bars instead of an exchange, on a simulated clock."""

    replay: ReplayCalendars  # the recordings, as their markets' calendars read them
    speed: float | None = None  # a multiple of real time; None: as fast as the engine goes
    max_ticks: int | None = None


class StartupFailed(Exception):
    """A start-up step that cannot go on: its exit code, its name and the reason (with the fix)."""

    def __init__(self, code: int, step: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.step, self.reason = code, step, reason


class StopRequest:
    """SIGTERM, SIGINT or the end of a replay: the first reason given wins."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason = ""

    def __call__(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


@dataclass
class Parts:
    """The running daemon's parts; None until the start-up step that builds them has run."""

    loaded: LoadedSettings
    settings: Settings  # as this run uses them (a replay: its recordings' symbols, timeframe)
    replay: ReplayRequest | None
    notifier: SystemdNotifier
    readiness: Readiness = field(default_factory=Readiness)
    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    # telemetry
    metrics: Metrics | None = None
    skill_metrics: SkillMetrics | None = None
    calendar_metrics: CalendarMetrics | None = None
    endpoint: HttpEndpoint | None = None
    link: MqttLink | None = None
    # start-up
    device: DeviceChoice | None = None
    venue: Venue | None = None
    engine: Engine | None = None
    slots: list[ModelSlot] = field(default_factory=list)
    controller: Controller | None = None
    nonces: CommandNonces | None = None  # used command nonces, in the ledger once it is open
    skill: LiveSkill | None = None
    ticks: TickLoop | None = None
    jobs: WallJobs | None = None
    # what ticks and jobs last saw
    last_report: TickReport | None = None
    quotes: dict[str, Quote | SkipReason] = field(default_factory=dict)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    def background(self, work: Awaitable[None], name: str) -> None:
        """Run `work` until shutdown (`shutdown.stop_background` cancels it)."""
        self.tasks.append(asyncio.ensure_future(work))
        self.tasks[-1].set_name(name)
