"""Time as a dependency: the wall clock for paper and live, a simulated one for replay."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol

from trader.domain import ensure_utc


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return once `now()` has reached `when`."""
        ...


class WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        delay = (ensure_utc(when, "when") - self.now()).total_seconds()
        if delay > 0:
            await asyncio.sleep(delay)


class SimulatedClock:
    """Replay time. `speed=None` jumps to each wake-up at once (as fast as the engine allows);
    `speed=60` lets a simulated minute pass in a real second."""

    def __init__(self, start: datetime, speed: float | None = None) -> None:
        if speed is not None and speed <= 0:
            raise ValueError(f"replay speed must be positive, got {speed}")
        self._now = ensure_utc(start, "start")
        self.speed = speed

    def now(self) -> datetime:
        return self._now

    def advance_to(self, when: datetime) -> None:
        when = ensure_utc(when, "when")
        if when < self._now:
            raise ValueError(f"simulated time runs forward: {when} < {self._now}")
        self._now = when

    async def sleep_until(self, when: datetime) -> None:
        when = ensure_utc(when, "when")
        if when <= self._now:
            await asyncio.sleep(0)
            return
        if self.speed is not None:
            await asyncio.sleep((when - self._now).total_seconds() / self.speed)
        else:
            await asyncio.sleep(0)  # let the rest of the loop run between simulated instants
        self.advance_to(when)
