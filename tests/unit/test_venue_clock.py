"""A sandbox's accelerated clock, which the daemon keeps too: it stands until its wall-clock
origin, then runs `speed` times as fast; its settings are refused anywhere but against a
local emulator; and recorded bars are laid on the bar starts a market expects around it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from trader.clock import ScaledClock
from trader.config.schema import Settings
from trader.domain import Bar, Timeframe
from trader.emulator.sandbox_replay import restamped
from trader.market.live_source import venue_clock

WALL = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
FRIDAY = datetime(2025, 3, 7, 14, 0, tzinfo=UTC)  # 09:00 in New York


class Wall:
    def __init__(self, now: datetime) -> None:
        self.at = now

    def now(self) -> datetime:
        return self.at

    async def sleep_until(self, when: datetime) -> None:  # pragma: no cover - not used
        raise NotImplementedError


def test_it_stands_at_its_origin_until_the_wall_reaches_it_then_runs_speed_times_as_fast():
    wall = Wall(WALL - timedelta(seconds=30))
    clock = ScaledClock(3600, WALL, FRIDAY, wall)
    assert clock.now() == FRIDAY  # held: time for a daemon to start
    wall.at = WALL + timedelta(seconds=1.5)
    assert clock.now() == FRIDAY + timedelta(hours=1.5)
    # Two processes that compute it from the same wall clock agree, whenever they started.
    assert ScaledClock(3600, WALL, FRIDAY, wall).now() == clock.now()
    with pytest.raises(ValueError, match="positive"):
        ScaledClock(0, WALL)


async def test_sleeping_until_an_instant_waits_the_wall_time_that_takes():
    clock = ScaledClock(36_000, datetime.now(UTC) + timedelta(seconds=0.05), FRIDAY)
    await clock.sleep_until(FRIDAY + timedelta(hours=1))  # 0.05 s held, then 0.1 s running
    assert clock.now() >= FRIDAY + timedelta(hours=1)
    assert clock.now() < FRIDAY + timedelta(hours=3)


def test_its_settings_are_for_a_local_emulator_only():
    fast = {"speed": 60, "wall_origin": WALL, "origin": FRIDAY}
    local = Settings(exchange={"api_base_url": "http://127.0.0.1:9380", "clock": fast})
    clock = venue_clock(local.exchange)
    assert isinstance(clock, ScaledClock)
    assert (clock.speed, clock.wall_origin, clock.origin) == (60, WALL, FRIDAY)
    assert type(venue_clock(Settings().exchange)).__name__ == "WallClock"
    for base_url in (None, "https://api.alpaca.markets"):
        with pytest.raises(ValidationError, match="only for a local emulator"):
            Settings(exchange={"api_base_url": base_url, "clock": fast})
    with pytest.raises(ValidationError, match="needs wall_origin"):
        Settings(exchange={"api_base_url": "http://localhost:1", "clock": {"speed": 60}})


def bars(count: int) -> list[Bar]:
    start = datetime(2004, 8, 19, tzinfo=UTC)
    day = Timeframe("1d")
    return [
        Bar("GOOG/USD", day, start + timedelta(days=i), 100 + i, 101 + i, 99 + i, 100.5 + i, 10)
        for i in range(count)
    ]


def test_recorded_bars_are_laid_on_the_sessions_warmup_of_them_closed_by_now():
    hour = Timeframe("1h")
    laid = restamped(bars(20), hour, 5, FRIDAY, "XNYS")
    assert [b.close for b in laid] == [b.close for b in bars(20)]  # the path, in order
    assert all(b.timeframe == hour for b in laid)
    assert laid[5].start == FRIDAY  # the next one forms now; five closed before it
    assert laid[4].end <= FRIDAY
    # Friday's session (14:30-21:00 UTC) on the hour grid, then Monday's in summer time.
    starts = [b.start.strftime("%a %H:%M") for b in laid[5:15]]
    assert starts == ["Fri 14:00", "Fri 15:00", "Fri 16:00", "Fri 17:00", "Fri 18:00",
                      "Fri 19:00", "Fri 20:00", "Mon 13:00", "Mon 14:00", "Mon 15:00"]  # fmt: skip
    around_the_clock = restamped(bars(20), hour, 5, FRIDAY + timedelta(minutes=20))
    assert [b.start for b in around_the_clock] == [
        FRIDAY + hour.duration * (i - 5) for i in range(20)
    ]
