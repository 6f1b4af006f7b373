"""The bar starts a timeframe expects on a calendar, held as arithmetic runs (first, count, one
step): a query is a binary search, and an array of starts is only made when asked for."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Protocol

import numpy as np

from trader.domain import Timeframe
from trader.market.calendars.units import (
    DAY_MS,
    WEEK_MS,
    WEEK_ORIGIN_MS,
    Anchor,
    Int64s,
    ceil_div,
)


class BarStarts(Protocol):
    """Expected bar starts, indexed in order; `below(x)` is the index of the first start >= x."""

    step: int
    bounded: bool
    total: int

    def below(self, x: int) -> int: ...
    def below_many(self, x: Int64s) -> Int64s: ...
    def at(self, k: int) -> int: ...
    def at_many(self, k: Int64s) -> Int64s: ...
    def take(self, lo: int, hi: int) -> Int64s: ...


class Lattice:
    """Every `phase + k * step`, k any integer: a continuous market's grid, never materialised."""

    bounded = False
    total = 0

    def __init__(self, phase: int, step: int) -> None:
        self.phase = phase
        self.step = step

    def below(self, x: int) -> int:
        return ceil_div(x - self.phase, self.step)

    def below_many(self, x: Int64s) -> Int64s:
        return -((self.phase - x) // self.step)

    def at(self, k: int) -> int:
        return self.phase + k * self.step

    def at_many(self, k: Int64s) -> Int64s:
        return (self.phase + k * self.step).astype(np.int64)

    def take(self, lo: int, hi: int) -> Int64s:
        return self.phase + np.arange(lo, hi, dtype=np.int64) * self.step


class Runs:
    """Run i holds `first[i] + j * step` for j < count[i]; runs are sorted and do not overlap."""

    bounded = True

    def __init__(self, first: Int64s, count: Int64s, step: int) -> None:
        keep = count > 0
        self.first = first[keep].astype(np.int64)
        self.count = count[keep].astype(np.int64)
        self.step = step
        # Starts in earlier runs: run i's starts are indices before[i] .. before[i] + count[i] - 1.
        self.before = np.concatenate(([0], np.cumsum(self.count)[:-1])).astype(np.int64)
        self.total = int(self.count.sum())
        # Python lists for the scalar path: bisect on a list beats numpy's per-call overhead.
        self._first = self.first.tolist()
        self._count = self.count.tolist()
        self._before = self.before.tolist()

    def below(self, x: int) -> int:
        i = bisect_left(self._first, x) - 1
        if i < 0:
            return 0
        return int(self._before[i] + min(self._count[i], ceil_div(x - self._first[i], self.step)))

    def below_many(self, x: Int64s) -> Int64s:
        i = np.searchsorted(self.first, x, "left") - 1
        safe = np.maximum(i, 0)
        inside = np.minimum(self.count[safe], -((self.first[safe] - x) // self.step))
        return np.where(i < 0, 0, self.before[safe] + inside).astype(np.int64)

    def at(self, k: int) -> int:
        i = bisect_right(self._before, k) - 1
        return int(self._first[i] + (k - self._before[i]) * self.step)

    def at_many(self, k: Int64s) -> Int64s:
        """`at` of each index (each in 0 .. total - 1)."""
        i = np.searchsorted(self.before, k, "right") - 1
        return (self.first[i] + (k - self.before[i]) * self.step).astype(np.int64)

    def take(self, lo: int, hi: int) -> Int64s:
        index = np.arange(lo, hi, dtype=np.int64)
        run = np.searchsorted(self.before, index, "right") - 1
        return (self.first[run] + (index - self.before[run]) * self.step).astype(np.int64)


def _lattice_runs(
    k_first: Int64s, k_last: Int64s, phase: int, step: int, span: tuple[int, int]
) -> Runs:
    """Runs from ranges [k_first, k_last] of grid indices (sorted by k_first), clipped to the
    span; ranges that share or touch a grid point merge, so a bar over two intervals counts once."""
    k_min = ceil_div(span[0] - phase, step)
    k_max = ceil_div(span[1] - phase, step) - 1
    lo = np.maximum(k_first, k_min)
    hi = np.minimum(k_last, k_max)
    keep = lo <= hi
    lo, hi = lo[keep], hi[keep]
    if lo.size == 0:
        return Runs(lo, lo, step)
    reach = np.maximum.accumulate(hi)
    new = np.concatenate(([True], lo[1:] > reach[:-1] + 1))
    heads = np.flatnonzero(new)
    first = lo[heads]
    last = np.maximum.reduceat(hi, heads)
    return Runs(phase + first * step, last - first + 1, step)


def bar_grid(
    name: str,
    timeframe: Timeframe,
    intervals: tuple[Int64s, Int64s],
    labels: Int64s,
    span: tuple[int, int] | None,
    anchor: Anchor,
) -> BarStarts:
    """The starts `timeframe` expects in the calendar `name`'s trading intervals (opens,
    closes) and session labels, inside `span` (None: a continuous market's unbounded grid)."""
    step = timeframe.seconds * 1000
    weekly = timeframe.text.endswith("w")
    if span is None:
        return Lattice(WEEK_ORIGIN_MS if weekly else 0, step)
    if weekly and step == WEEK_MS:
        weeks = np.unique((labels - WEEK_ORIGIN_MS) // WEEK_MS)
        return _lattice_runs(weeks, weeks, WEEK_ORIGIN_MS, WEEK_MS, span)
    if step == DAY_MS:
        days = labels // DAY_MS
        return _lattice_runs(days, days, 0, DAY_MS, span)
    if step > DAY_MS or weekly:
        raise ValueError(
            f"{name}: a {timeframe} timeframe has no expected bars on a session calendar;"
            " intraday timeframes, 1d and 1w do"
        )
    opens, closes = intervals
    if anchor == "clock":
        return _lattice_runs(opens // step, (closes - 1) // step, 0, step, span)
    # Each interval's own grid, from its open; the part before the span is skipped.
    skip = np.maximum(0, -((opens - span[0]) // step))
    first = opens + skip * step
    count = -((opens - closes) // step) - skip
    count = np.minimum(count, -((first - span[1]) // step))
    return Runs(first, count, step)
