"""The daemon's schedule as the metrics tell it: the tick loop's next due tick (left in the past
by a tick that hangs), a replay that has run all its ticks, missed ticks in a row, and what
telemetry knows from the settings as it starts (timeframe, quote age, venue)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import datetime, timedelta
from types import SimpleNamespace

from tests.unit.engine.builders import T0
from tests.unit.service.test_parts import parts, sample
from trader.clock import SimulatedClock
from trader.daemon.ticks import RecordedTicks, TickLoop
from trader.engine.report import TickReport
from trader.logging import get_logger
from trader.service.exchange import ExchangeConnection
from trader.service.parts import Parts, ReplayRequest
from trader.service.shutdown import stop_background
from trader.service.telemetry import start_telemetry
from trader.service.ticking import Ticking

HOUR = timedelta(hours=1)


def ticking(made: Parts) -> Ticking:
    return Ticking(made, ExchangeConnection(made, get_logger("test")), get_logger("test"))


def due(made: Parts) -> float | None:
    return sample(made, "trader_next_tick_due_timestamp_seconds")


async def test_a_hanging_tick_leaves_the_due_time_behind_the_daemons_clock():
    made = parts()
    clock = SimulatedClock(T0)
    assert made.metrics is not None
    made.metrics.use_clock(clock)
    started, release = asyncio.Event(), asyncio.Event()

    async def tick(at: datetime) -> TickReport:
        started.set()
        await release.wait()  # a hung exchange call
        return TickReport(at, ready=made.settings.market.symbols)

    loop = TickLoop(tick, RecordedTicks([T0, T0 + HOUR]), clock, grace_s=None,
                    observer=ticking(made))  # fmt: skip
    assert due(made) == 0  # before the loop starts
    stop = asyncio.Event()
    running = asyncio.create_task(loop.run(stop, max_ticks=1))
    await asyncio.wait_for(started.wait(), timeout=5)
    clock.advance_to(T0 + timedelta(minutes=30))
    assert due(made) == T0.timestamp()
    assert sample(made, "trader_clock_timestamp_seconds") == T0.timestamp() + 1800
    release.set()
    await asyncio.wait_for(running, timeout=5)
    assert due(made) == (T0 + HOUR).timestamp()  # the next one, ahead of the clock again
    assert sample(made, "trader_replay_finished") == 0  # stopped, not run out


async def test_a_replay_that_ran_all_its_ticks_says_so_and_has_nothing_due():
    made = parts()
    made.replay = ReplayRequest(SimpleNamespace())  # type: ignore[arg-type]
    times = [T0 + HOUR * i for i in range(3)]

    async def tick(at: datetime) -> TickReport:
        assert sample(made, "trader_replay_finished") == 0
        assert due(made) == at.timestamp()
        return TickReport(at)

    loop = TickLoop(tick, RecordedTicks(times), SimulatedClock(T0), grace_s=None,
                    observer=ticking(made))  # fmt: skip
    assert await loop.run(asyncio.Event()) == 3
    assert (due(made), sample(made, "trader_replay_finished")) == (0, 1)


def test_missed_ticks_count_as_not_ok_in_a_row_until_an_ok_tick():
    made = parts()
    observer = ticking(made)
    for n in range(3):
        observer.on_lateness(T0 + HOUR * n, 7200.0, missed=True)
    assert sample(made, "trader_ticks_not_ok_in_a_row") == 3
    observer.on_lateness(T0 + 3 * HOUR, 2.0, missed=False)  # late, but it runs
    assert sample(made, "trader_ticks_not_ok_in_a_row") == 3
    assert made.metrics is not None
    made.metrics.observe_tick(TickReport(T0 + 3 * HOUR, ready=made.settings.market.symbols))
    assert sample(made, "trader_ticks_not_ok_in_a_row") == 0


async def test_telemetry_starts_knowing_the_timeframe_the_quote_age_and_the_venue():
    made = parts(
        metrics={"enabled": False},
        market={"symbols": ["AAPL/USD"], "timeframe": "1m", "max_quote_age_s": 12},
        exchange={"venue": "alpaca"},
        broker={"currency": "USD"},
    )

    async def on_command(payload: bytes) -> None:
        return None

    async with AsyncExitStack() as stack:
        await start_telemetry(made, stack, on_command, get_logger("test"))
        await stop_background(made, "test")
    assert sample(made, "trader_timeframe_seconds") == 60
    assert sample(made, "trader_quote_max_age_seconds") == 12
    assert sample(made, "trader_exchange_info", venue="alpaca", exchange="alpaca") == 1
