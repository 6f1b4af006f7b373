"""When ticks fall, and the loop that runs them: one at a time, on the daemon's clock.

Why the tick is not an APScheduler job: APScheduler times its jobs on the wall clock, while a
replay runs on a simulated clock that may go thousands of times faster (or jump from one bar
close to the next as soon as the engine is done). So the tick loop waits on the `Clock`
itself, and the same code ticks a live daemon at bar close + settle delay and a replay at each
recorded bar close. It keeps APScheduler's guarantees for ticks: one instance at a time (the
loop awaits each tick before it looks for the next: `max_instances=1`), and a late tick is
coalesced (ticks that fell due while one ran, or while the machine stalled, become one run of
the latest; the others are counted as missed with their lateness). A tick later than the
misfire grace is not run at all but counted missed. APScheduler runs the wall-clock jobs
(quotes, reconciliation, equity, heartbeat): see `trader.daemon.jobs`.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from trader.clock import Clock
from trader.domain import Timeframe, from_epoch_ms, to_epoch_ms
from trader.engine.report import TickReport
from trader.logging import get_logger
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.per_symbol import SymbolCalendars

MAX_MISSED_OBSERVED = 1000  # a long stall is counted whole, its lateness sampled


class TickTimes(Protocol):
    def after(self, previous: datetime) -> datetime | None:
        """The first tick time strictly after `previous`; None when there are no more."""
        ...

    def due(self, now: datetime) -> datetime | None:
        """The latest tick time at or before `now`; None if there is none yet."""
        ...

    def lateness(self, at: datetime, now: datetime) -> timedelta:
        """How late a tick for `at` is at `now`, as the misfire grace counts it."""
        ...


class BarCloseTicks:
    """Live ticks: the close of each bar some symbol's market expects (in its sessions: a
    stock has no tick at night), plus `settle` (exchanges need a moment to publish the closed
    bar). Lateness counts the markets' trading time only: a daily bar's tick that a restart
    reaches hours later, before the next session opens, is not late at all."""

    def __init__(
        self, timeframe: Timeframe, settle: timedelta, calendars: SymbolCalendars | None = None
    ) -> None:
        if settle >= timeframe.duration:
            raise ValueError(f"settle delay {settle} is not shorter than a {timeframe} bar")
        self.timeframe, self.settle = timeframe, settle
        self.calendars = calendars or SymbolCalendars.continuous(["any"])

    def _markets(self, at: datetime) -> list[TradingCalendar]:
        self.calendars.cover(at)
        return list({id(c): c for c in self.calendars.values()}.values())

    def due(self, now: datetime) -> datetime | None:
        closes = [
            c.last_bar_end(self.timeframe, to_epoch_ms(now - self.settle))
            for c in self._markets(now)
        ]
        known = [close for close in closes if close is not None]
        return from_epoch_ms(max(known)) + self.settle if known else None

    def after(self, previous: datetime) -> datetime:
        markets = self._markets(previous)
        close = min(
            c.next_bar_end(self.timeframe, to_epoch_ms(previous - self.settle)) for c in markets
        )
        return from_epoch_ms(close) + self.settle

    def lateness(self, at: datetime, now: datetime) -> timedelta:
        if now <= at:
            return now - at
        trading = max(
            c.session_ms_between(to_epoch_ms(at), to_epoch_ms(now)) for c in self._markets(now)
        )
        return timedelta(milliseconds=trading)


class RecordedTicks:
    """Replay ticks: the given times (bar closes of a recording), in order."""

    def __init__(self, times: Sequence[datetime]) -> None:
        self.times = sorted(times)

    def after(self, previous: datetime) -> datetime | None:
        i = bisect.bisect_right(self.times, previous)
        return self.times[i] if i < len(self.times) else None

    def due(self, now: datetime) -> datetime | None:
        i = bisect.bisect_right(self.times, now)
        return self.times[i - 1] if i else None

    def lateness(self, at: datetime, now: datetime) -> timedelta:
        return now - at


class TickObserver(Protocol):
    def on_lateness(self, at: datetime, lateness_s: float, *, missed: bool) -> None: ...

    def on_due(self, at: datetime | None) -> None:
        """The tick the loop now waits for or runs (kept while it runs, so a tick that hangs
        leaves it in the past); None once the times have run out."""
        ...


class _NoObserver:
    def on_lateness(self, at: datetime, lateness_s: float, *, missed: bool) -> None:
        return None

    def on_due(self, at: datetime | None) -> None:
        return None


class TickLoop:
    def __init__(
        self,
        tick: Callable[[datetime], Awaitable[TickReport]],
        times: TickTimes,
        clock: Clock,
        *,
        grace_s: float | None,
        lock: asyncio.Lock | None = None,
        observer: TickObserver | None = None,
    ) -> None:
        self._tick = tick
        self.times = times
        self.clock = clock
        # None: never too late (a replay's simulated clock waits for every tick).
        self.grace = timedelta.max if grace_s is None else timedelta(seconds=grace_s)
        # Held while a tick runs: commands, reconciliation and a stop wait for it.
        self.lock = lock or asyncio.Lock()
        self._observer = observer or _NoObserver()
        self._log = get_logger("trader.ticks")
        self.ran = 0
        self.last: datetime | None = None  # the last tick time run or given up
        self.due: datetime | None = None  # the tick awaited or running now (None: no more)

    async def run(
        self,
        stop: asyncio.Event,
        *,
        after: datetime | None = None,
        max_ticks: int | None = None,
    ) -> int:
        """Tick until `stop` is set, the times run out, or `max_ticks` have run; resume after
        `after` (the ledger's last tick). The number of ticks run."""
        self.last = after
        at = self._first(after)
        self._due(at)
        while at is not None and not stop.is_set():
            if max_ticks is not None and self.ran >= max_ticks:
                break
            if not await self._sleep_until(at, stop):
                break
            at = self._coalesce(at, self.clock.now())
            self._due(at)
            lateness = self.times.lateness(at, self.clock.now()).total_seconds()
            if lateness > self.grace.total_seconds():
                self._observer.on_lateness(at, lateness, missed=True)
                self._log.warning("tick missed", at=at.isoformat(), lateness_s=round(lateness, 3))
            else:
                self._observer.on_lateness(at, lateness, missed=False)
                await self._run_one(at, lateness)
            self.last = at
            at = self.times.after(at)
            self._due(at)
        return self.ran

    def _due(self, at: datetime | None) -> None:
        self.due = at
        self._observer.on_due(at)

    def _first(self, after: datetime | None) -> datetime | None:
        """The tick that fell due last, if it is within the grace and not done yet (a start
        just after a bar close catches that tick up); else the next one to come."""
        now = self.clock.now()
        due = self.times.due(now)
        if (
            due is not None
            and (after is None or due > after)
            and self.times.lateness(due, now) <= self.grace
        ):
            return due
        return self.times.after(max(now, after) if after is not None else now)

    def _coalesce(self, at: datetime, now: datetime) -> datetime:
        """The latest tick due by `now`; the ones passed over are counted missed."""
        due = self.times.due(now)
        if due is None or due <= at:
            return at
        missed: datetime | None = at
        n = 0
        while missed is not None and missed < due:
            if n < MAX_MISSED_OBSERVED:
                self._observer.on_lateness(missed, (now - missed).total_seconds(), missed=True)
            n += 1
            missed = self.times.after(missed)
        self._log.warning(
            "ticks coalesced", missed=n, first=at.isoformat(), running=due.isoformat()
        )
        return due

    async def _sleep_until(self, at: datetime, stop: asyncio.Event) -> bool:
        """Wait for `at` on the clock; False if `stop` came first."""
        if stop.is_set():
            return False
        sleeper = asyncio.ensure_future(self.clock.sleep_until(at))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                task.cancel()
        return sleeper.done() and not sleeper.cancelled() and not stop.is_set()

    async def _run_one(self, at: datetime, lateness: float) -> None:
        log = self._log.bind(at=at.isoformat())
        log.debug("tick started", lateness_s=round(lateness, 3))
        async with self.lock:
            try:
                outcome = (await self._tick(at)).outcome
            except Exception:
                # The engine contains its own failures; this is a bug in a hook. Say so and
                # keep ticking: the daemon must not die of it.
                log.exception("tick raised")
                outcome = "failed"
        self.ran += 1
        log.info("tick done", outcome=outcome, lateness_s=round(lateness, 3))
