"""Tick times and the tick loop: on the clock, one at a time, late ticks coalesced and counted."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from trader.clock import SimulatedClock
from trader.daemon.ticks import BarCloseTicks, RecordedTicks, TickLoop
from trader.domain import Timeframe
from trader.engine.report import TickReport
from trader.market.calendars.per_symbol import SymbolCalendars

HOUR = timedelta(hours=1)
T0 = datetime(2025, 3, 1, 10, 0, 5, tzinfo=UTC)  # the 10:00 bar close plus a 5 s settle delay


class ManualClock:
    """Time moves only when told to, or when someone sleeps until later."""

    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now

    def advance(self, by: timedelta) -> None:
        self._now += by

    async def sleep_until(self, when: datetime) -> None:
        await asyncio.sleep(0)
        self._now = max(self._now, when)


class Recorder:
    def __init__(self) -> None:
        self.lateness: list[tuple[datetime, float, bool]] = []
        self.due: list[datetime | None] = []

    def on_lateness(self, at: datetime, lateness_s: float, *, missed: bool) -> None:
        self.lateness.append((at, lateness_s, missed))

    def on_due(self, at: datetime | None) -> None:
        self.due.append(at)


def test_bar_close_ticks_fall_at_each_close_plus_the_settle_delay():
    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5))
    assert ticks.due(T0) == T0
    assert ticks.due(T0 - timedelta(seconds=1)) == T0 - HOUR
    assert ticks.due(T0 + timedelta(minutes=59)) == T0
    assert ticks.after(T0) == T0 + HOUR
    assert ticks.after(T0 - timedelta(seconds=1)) == T0
    daily = BarCloseTicks(Timeframe("1d"), timedelta(seconds=30))
    noon = datetime(2025, 3, 1, 12, tzinfo=UTC)
    assert daily.due(noon) == datetime(2025, 3, 1, 0, 0, 30, tzinfo=UTC)
    assert daily.after(noon) == datetime(2025, 3, 2, 0, 0, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match="not shorter"):
        BarCloseTicks(Timeframe("1m"), timedelta(seconds=60))


def xnys(now: datetime, timeframe: str = "1h") -> SymbolCalendars:
    return SymbolCalendars.named({"GOOG/USD": "XNYS"}, now, Timeframe(timeframe), 64)


def test_bar_close_ticks_fall_in_the_markets_sessions_only():
    friday = datetime(2025, 2, 28, 20, 0, 5, tzinfo=UTC)  # 15:00 New York: the 14:30 bar closed
    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5), xnys(friday))
    # Session-anchored? No: clock-grid bars overlapping the session (14:00Z..20:00Z on Friday).
    assert ticks.after(friday) == datetime(2025, 2, 28, 21, 0, 5, tzinfo=UTC)  # the close
    monday = ticks.after(datetime(2025, 2, 28, 21, 0, 5, tzinfo=UTC))
    assert monday == datetime(2025, 3, 3, 15, 0, 5, tzinfo=UTC)  # the 14:00Z bar (9:30 open)
    saturday = datetime(2025, 3, 1, 12, tzinfo=UTC)
    assert ticks.due(saturday) == datetime(2025, 2, 28, 21, 0, 5, tzinfo=UTC)
    # A restart on Saturday finds Friday's last tick not late at all: no trading time passed.
    assert ticks.lateness(ticks.due(saturday), saturday) == timedelta(0)
    during = datetime(2025, 3, 3, 15, 30, tzinfo=UTC)  # an hour into Monday's session
    assert ticks.lateness(datetime(2025, 2, 28, 21, 0, 5, tzinfo=UTC), during) == timedelta(hours=1)


async def test_a_tick_a_weekend_late_still_runs_when_the_grace_counts_trading_time():
    friday_close = datetime(2025, 2, 28, 21, 0, 5, tzinfo=UTC)
    saturday = datetime(2025, 3, 1, 12, tzinfo=UTC)
    ran: list[datetime] = []

    async def tick(at: datetime) -> TickReport:
        ran.append(at)
        return TickReport(at)

    clock = ManualClock(saturday)
    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5), xnys(saturday))
    loop = TickLoop(tick, ticks, clock, grace_s=600)
    await loop.run(asyncio.Event(), max_ticks=1)
    assert ran == [friday_close]  # 15 hours of wall time, none of trading time


def test_recorded_ticks_step_through_their_times():
    times = [T0 + HOUR * i for i in range(3)]
    ticks = RecordedTicks(reversed(times))  # order does not matter
    assert ticks.after(T0 - HOUR) == T0
    assert ticks.after(T0) == T0 + HOUR
    assert ticks.after(times[-1]) is None
    assert ticks.due(T0 - timedelta(seconds=1)) is None
    assert ticks.due(T0 + HOUR + timedelta(minutes=5)) == T0 + HOUR


async def test_a_replay_ticks_every_recorded_time_once_in_order_on_the_simulated_clock():
    times = [T0 + HOUR * i for i in range(50)]
    clock = SimulatedClock(times[0])
    seen: list[tuple[datetime, datetime]] = []

    async def tick(at: datetime) -> TickReport:
        seen.append((at, clock.now()))
        return TickReport(at)

    loop = TickLoop(tick, RecordedTicks(times), clock, grace_s=600)
    assert await loop.run(asyncio.Event()) == 50
    assert [at for at, _ in seen] == times
    assert all(now == at for at, now in seen)  # on schedule: simulated time is the tick's


async def test_a_replay_resumes_after_the_ledgers_last_tick_and_stops_at_max_ticks():
    times = [T0 + HOUR * i for i in range(10)]
    clock = SimulatedClock(times[4])
    seen: list[datetime] = []

    async def tick(at: datetime) -> TickReport:
        seen.append(at)
        return TickReport(at)

    loop = TickLoop(tick, RecordedTicks(times), clock, grace_s=600)
    assert await loop.run(asyncio.Event(), after=times[3], max_ticks=3) == 3
    assert seen == times[4:7]


async def test_ticks_that_fall_due_while_one_runs_are_coalesced_and_counted_missed():
    clock = ManualClock(T0 - timedelta(minutes=10))
    recorder = Recorder()
    seen: list[datetime] = []
    running = [0]

    async def tick(at: datetime) -> TickReport:
        running[0] += 1
        assert running[0] == 1, "two ticks ran at once"
        seen.append(at)
        if len(seen) == 1:
            clock.advance(timedelta(hours=2, minutes=5))  # this one overran two bar closes
        await asyncio.sleep(0)
        running[0] -= 1
        return TickReport(at)

    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5))
    loop = TickLoop(tick, ticks, clock, grace_s=600, observer=recorder)
    assert await loop.run(asyncio.Event(), max_ticks=3) == 3
    # 10:00:05 ran and lasted until 12:05:05; 11:00:05 was passed over, 12:00:05 ran late.
    assert seen == [T0, T0 + 2 * HOUR, T0 + 3 * HOUR]
    missed = [(at, late) for at, late, was_missed in recorder.lateness if was_missed]
    assert missed == [(T0 + HOUR, (65 * 60.0))]
    ran_late = [late for at, late, was_missed in recorder.lateness if not was_missed]
    assert ran_late == [0.0, 300.0, 0.0]


async def test_a_tick_later_than_the_grace_is_missed_not_run():
    clock = ManualClock(T0 - timedelta(minutes=1))
    recorder = Recorder()
    seen: list[datetime] = []

    async def tick(at: datetime) -> TickReport:
        seen.append(at)
        if len(seen) == 1:
            clock.advance(HOUR + timedelta(minutes=20))  # the machine stalled
        return TickReport(at)

    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5))
    loop = TickLoop(tick, ticks, clock, grace_s=600, observer=recorder)
    assert await loop.run(asyncio.Event(), max_ticks=2) == 2
    assert seen == [T0, T0 + 2 * HOUR]
    assert (T0 + HOUR, 20 * 60.0, True) in recorder.lateness


async def test_a_start_just_after_a_close_catches_that_tick_up_a_later_start_waits():
    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5))
    for started, first in (
        (T0 + timedelta(minutes=3), T0),
        (T0 + timedelta(minutes=30), T0 + HOUR),
    ):
        clock = ManualClock(started)
        recorder = Recorder()
        seen: list[datetime] = []

        async def tick(at: datetime, seen: list[datetime] = seen) -> TickReport:
            seen.append(at)
            return TickReport(at)

        loop = TickLoop(tick, ticks, clock, grace_s=600, observer=recorder)
        await loop.run(asyncio.Event(), max_ticks=1)
        assert seen == [first]
        assert not any(missed for _, _, missed in recorder.lateness)  # not running is not missing


async def test_a_tick_already_in_the_ledger_is_not_run_again():
    clock = ManualClock(T0 + timedelta(minutes=3))
    seen: list[datetime] = []

    async def tick(at: datetime) -> TickReport:
        seen.append(at)
        return TickReport(at)

    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5))
    await TickLoop(tick, ticks, clock, grace_s=600).run(asyncio.Event(), after=T0, max_ticks=1)
    assert seen == [T0 + HOUR]


async def test_stop_ends_the_wait_for_the_next_tick_and_a_raising_tick_does_not_end_the_loop():
    clock = SimulatedClock(T0, speed=1.0)  # real time: the next tick is an hour away
    calls: list[datetime] = []
    stop, ticked = asyncio.Event(), asyncio.Event()

    async def tick(at: datetime) -> TickReport:
        calls.append(at)
        ticked.set()
        raise RuntimeError("a hook broke")

    loop = TickLoop(tick, RecordedTicks([T0, T0 + HOUR]), clock, grace_s=600)
    running = asyncio.create_task(loop.run(stop))
    await asyncio.wait_for(ticked.wait(), timeout=5)
    await asyncio.sleep(0.05)  # the loop is now waiting for the next tick, an hour away
    stop.set()
    assert await asyncio.wait_for(running, timeout=5) == 1
    assert calls == [T0]
    assert clock.now() == T0  # the hour never passed


async def test_without_a_grace_no_tick_is_too_late():
    clock = ManualClock(T0 + timedelta(days=3))  # the ledger's last tick was days ago
    seen: list[datetime] = []

    async def tick(at: datetime) -> TickReport:
        seen.append(at)
        return TickReport(at)

    loop = TickLoop(tick, RecordedTicks([T0, T0 + HOUR]), clock, grace_s=None)
    assert await loop.run(asyncio.Event(), after=T0 - HOUR) == 1
    assert seen == [T0 + HOUR]  # coalesced to the latest due, and run however late


def changes(due: list[datetime | None]) -> list[datetime | None]:
    """The due times the observer was told, each once (it is told again as a tick starts)."""
    return [at for i, at in enumerate(due) if i == 0 or at != due[i - 1]]


async def test_the_observer_is_told_each_due_tick_and_none_when_the_times_run_out():
    times = [T0 + HOUR * i for i in range(3)]
    recorder = Recorder()
    seen: list[tuple[datetime, datetime | None]] = []

    async def tick(at: datetime) -> TickReport:
        seen.append((at, recorder.due[-1]))
        return TickReport(at)

    loop = TickLoop(tick, RecordedTicks(times), SimulatedClock(times[0]), grace_s=600,
                    observer=recorder)  # fmt: skip
    assert await loop.run(asyncio.Event()) == 3
    assert changes(recorder.due) == [*times, None]
    assert all(at == due for at, due in seen)  # while a tick runs, it is the one due


async def test_a_stopped_loop_leaves_the_next_tick_due_and_a_coalesced_tick_is_the_one_due():
    clock = ManualClock(T0 - timedelta(minutes=10))
    recorder = Recorder()

    async def tick(at: datetime) -> TickReport:
        if at == T0:
            clock.advance(timedelta(hours=2, minutes=5))  # overran two closes
        return TickReport(at)

    ticks = BarCloseTicks(Timeframe("1h"), timedelta(seconds=5))
    loop = TickLoop(tick, ticks, clock, grace_s=600, observer=recorder)
    assert await loop.run(asyncio.Event(), max_ticks=2) == 2
    # 11:00:05 was due after 10:00:05 ran; 12:00:05 ran in its place; 13:00:05 is next.
    assert changes(recorder.due) == [T0, T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]


async def test_a_hanging_tick_keeps_its_due_time_while_the_clock_runs_past_it():
    clock = SimulatedClock(T0)
    recorder = Recorder()
    started, release = asyncio.Event(), asyncio.Event()

    async def tick(at: datetime) -> TickReport:
        started.set()
        await release.wait()  # a hung exchange call
        return TickReport(at)

    loop = TickLoop(tick, RecordedTicks([T0, T0 + HOUR]), clock, grace_s=None,
                    observer=recorder)  # fmt: skip
    running = asyncio.create_task(loop.run(asyncio.Event()))
    await asyncio.wait_for(started.wait(), timeout=5)
    clock.advance_to(T0 + timedelta(minutes=30))
    await asyncio.sleep(0)
    assert recorder.due[-1] == T0 < clock.now()  # in the past: the scheduler is stuck
    release.set()
    assert await asyncio.wait_for(running, timeout=5) == 2
    assert changes(recorder.due)[-2:] == [T0 + HOUR, None]
