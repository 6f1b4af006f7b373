"""What the market-aware alert tests share: an accelerated ccxt venue (the exchange emulator on
a venue clock the daemon keeps too, `exchange.clock`), the project's `for:` durations
time-lapsed by that clock's speed, and the alerts Prometheus recorded over a run (its own
`ALERTS` series, so a state held for less than a poll is still seen)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.integration.prometheus import RunningPrometheus, rule_for, seconds
from trader.clock import ScaledClock
from trader.domain import Bar, Timeframe
from trader.emulator import EmulatedMarket, Instrument
from trader.emulator.sandbox_replay import restamped

# The alerts that judge a daemon by its schedule and its market's sessions: each must stay
# quiet while the market is closed, and none may be silenced for a sandbox's clock.
SESSION_AWARE = (
    "TraderQuoteStale",
    "TraderTickStale",
    "TraderNoTickSinceStart",
    "TraderNoOkTick",
    "TraderTicksDegraded",
    "TraderDataSkipping",
    "TraderMissedTicks",
)
# The alert that judges a daemon by Prometheus's scrapes of it (`up`), whatever its market: one
# scrape a starved test machine answers late makes it pending, no outage; the rule waits out
# eight scrapes (2m of 15 s), and a test judges it by firing after as many of its own.
SCRAPED = "TraderDown"
SCRAPES_TO_FIRE = 8


def time_lapsed(alerts: Sequence[str], speed: float, floor_s: float = 1.0) -> dict[str, str]:
    """Each alert's `for:` from the project's rules divided by the venue clock's `speed` (at
    least `floor_s`, Prometheus evaluating once a second): on an accelerated venue the run is
    then the real one time-lapsed, `for:` included."""
    return {a: f"{max(floor_s, seconds(rule_for(a)) / speed) * 1000:.0f}ms" for a in alerts}


def seen(prom: RunningPrometheus, alerts: Sequence[str], start: float, end: float) -> dict:
    """{alert: {"pending", "firing"}} for every state each of `alerts` was in between
    `start` and `end` (epoch s), from Prometheus's ALERTS series."""
    window = f"{max(1, math.ceil(end - start))}s"
    names = "|".join(alerts)
    result = prom.query(f'max_over_time(ALERTS{{alertname=~"{names}"}}[{window}])', end)
    states: dict[str, set[str]] = {}
    for series in result["result"]:
        states.setdefault(series["metric"]["alertname"], set()).add(series["metric"]["alertstate"])
    return states


def first(prom: RunningPrometheus, alert: str, state: str, start: float, end: float) -> float:
    at = prom.first_sample(f'ALERTS{{alertname="{alert}",alertstate="{state}"}}', start, end)
    assert at is not None, f"{alert} was never {state}"
    return at


@dataclass
class AcceleratedVenue:
    """The ccxt exchange emulator's market on a venue clock running `speed` times as fast as
    the wall clock from `clock.wall_origin` (standing at `clock.origin` until then)."""

    clock: ScaledClock
    market: EmulatedMarket
    timeframe: Timeframe

    def env(self) -> dict[str, str]:
        """The daemon's settings for the same clock (it computes it from the wall clock too)."""
        return {
            "TRADER_EXCHANGE__CLOCK__SPEED": f"{self.clock.speed:g}",
            "TRADER_EXCHANGE__CLOCK__WALL_ORIGIN": self.clock.wall_origin.isoformat(),
            "TRADER_EXCHANGE__CLOCK__ORIGIN": self.clock.origin.isoformat(),
            "TRADER_MARKET__TIMEFRAME": self.timeframe.text,
        }

    def wall(self, at: datetime) -> float:
        """The wall-clock instant (epoch s) at which the venue's clock shows `at`."""
        return (self.clock.wall_origin + (at - self.clock.origin) / self.clock.speed).timestamp()

    def venue_seconds(self, wall_s: float) -> float:
        """The venue's time (epoch s) at the wall-clock instant `wall_s`."""
        ran = max(0.0, wall_s - self.clock.wall_origin.timestamp())
        return self.clock.origin.timestamp() + ran * self.clock.speed


def accelerated_venue(
    listings: dict[str, tuple[list[Bar], str]],
    timeframe: Timeframe,
    speed: float,
    origin: datetime,
    hold_s: float = 0.0,
    warmup: int = 200,
) -> AcceleratedVenue:
    """Each symbol's recorded bars laid `timeframe` apart on its calendar (`warmup` of them
    closed at `origin`, as `trader sandbox` lays them), on a venue clock that stands at
    `origin` for `hold_s` wall seconds (the daemon starts meanwhile) and then runs."""
    wall_origin = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=hold_s + 1)
    clock = ScaledClock(speed, wall_origin, origin)
    market = EmulatedMarket(clock.now)
    for symbol, (bars, calendar) in listings.items():
        market.add_listing(Instrument(symbol), restamped(bars, timeframe, warmup, origin, calendar))
    return AcceleratedVenue(clock, market, timeframe)


def keep_log(daemon_lines: list[dict], path: Path) -> None:
    """The daemon's log lines, kept beside the test's files for a post-mortem."""
    path.write_text("".join(json.dumps(line) + "\n" for line in daemon_lines))
