"""Readings of a file's bar times against a calendar: in which zone, as bar starts or ends,
anchored on the clock or at session opens; and the share of the bars each one explains."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trader.domain import Timeframe
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.registry import CalendarBuilder
from trader.market.calendars.units import DAY_MS, Anchor, Int64s
from trader.market.calendars.wall_clock import wall_to_utc

QUALIFIES = 0.995  # share of bars on expected starts: a stray bar or two is data, not a misfit
TIE = 0.001  # missing shares this close are a tie, settled by candidate and variant order

Label = Literal["start", "end"]


@dataclass(frozen=True, eq=False)
class Trial:
    calendar: TradingCalendar
    timezone: str
    label: Label
    starts: Int64s
    bars: int  # distinct bars in the data
    on: int  # of which on expected starts
    expected: int

    @property
    def in_session(self) -> float:
        return self.on / self.bars

    @property
    def missing(self) -> int:
        return self.expected - self.on

    @property
    def missing_share(self) -> float:
        return self.missing / self.expected if self.expected else 1.0

    @property
    def plain(self) -> bool:
        return self.timezone == "UTC" and self.label == "start" and self.calendar.anchor == "clock"

    def qualifies(self) -> bool:
        return self.expected > 0 and self.in_session >= QUALIFIES


def trial(
    calendar: TradingCalendar,
    starts: Int64s,
    bars: Int64s,
    timeframe: Timeframe,
    zone: str,
    label: Label,
) -> Trial:
    """`starts` read against `calendar`; `bars` are the same times sorted and distinct."""
    if calendar.span_ms is not None:
        lo, hi = np.searchsorted(bars, calendar.span_ms)
        inside = bars[lo:hi]
    else:
        inside = bars
    on = int(calendar.expected_mask(timeframe, inside).sum()) if inside.size else 0
    expected = (
        calendar.count_bar_starts(timeframe, int(inside[0]), int(inside[-1]) + 1)
        if inside.size
        else 0
    )
    return Trial(
        calendar=calendar,
        timezone=zone,
        label=label,
        starts=starts,
        bars=int(bars.size),
        on=on,
        expected=expected,
    )


def distinct(times: Int64s) -> Int64s:
    ordered = np.sort(times)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def trials(
    builder: CalendarBuilder, name: str, starts: Int64s, timeframe: Timeframe, naive: bool
) -> list[Trial]:
    """Every reading of the data against `name`, simplest first: zone (UTC, then the market's),
    label (start, then end), anchor (clock, then session)."""
    step = timeframe.seconds * 1000
    intraday = step < DAY_MS
    pad = 2 * DAY_MS + step  # room for reading times in another zone or as bar ends
    base = builder.build(name, int(starts.min()) - pad, int(starts.max()) + pad)
    zones = ["UTC"]
    if naive and not base.continuous and base.timezone != "UTC":
        zones.append(base.timezone)
    labels: tuple[Label, ...] = ("start", "end") if intraday else ("start",)
    anchors: tuple[Anchor, ...] = (
        ("clock", "session") if intraday and not base.continuous else ("clock",)
    )
    found: list[Trial] = []
    for zone in zones:
        utc = wall_to_utc(starts, zone)
        bars = distinct(utc)
        for label in labels:
            shift = step if label == "end" else 0
            found.extend(
                trial(base.with_anchor(a), utc - shift, bars - shift, timeframe, zone, label)
                for a in anchors
            )
    return found


def pick(candidates: Iterable[Trial]) -> Trial | None:
    """The qualifying trial with the fewest missing; near-ties go to the earliest."""
    qualifying = [t for t in candidates if t.qualifies()]
    if not qualifying:
        return None
    best = min(t.missing_share for t in qualifying)
    return next(t for t in qualifying if t.missing_share <= best + TIE)
