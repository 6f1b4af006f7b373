"""Time as a dependency: the wall clock for paper and live, a scaled one for a sandbox's
accelerated venue, a simulated one for replay."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
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


class ScaledClock:
    """A venue's accelerated time (a sandbox's replay): it stands at `origin` until the
    wall-clock instant `wall_origin`, then runs `speed` times as fast as the wall clock. The
    sandbox and the daemon each compute it from the wall clock alone, so they agree without
    talking, and a restarted daemon finds the same time again."""

    def __init__(
        self,
        speed: float,
        wall_origin: datetime,
        origin: datetime | None = None,
        wall: Clock | None = None,
    ) -> None:
        if not speed > 0:
            raise ValueError(f"clock speed must be positive, got {speed}")
        self.speed = speed
        self.wall_origin = ensure_utc(wall_origin, "wall_origin")
        self.origin = ensure_utc(origin, "origin") if origin is not None else self.wall_origin
        self._wall = wall or WallClock()

    def now(self) -> datetime:
        ran = max(self._wall.now() - self.wall_origin, timedelta(0))
        return self.origin + ran * self.speed

    async def sleep_until(self, when: datetime) -> None:
        """Until the wall clock reaches the instant this clock shows `when`."""
        at = self.wall_origin + (ensure_utc(when, "when") - self.origin) / self.speed
        delay = (at - self._wall.now()).total_seconds()
        if delay > 0:
            await asyncio.sleep(delay)
