"""A market's trading calendar: which bars a timeframe expects, as integer epoch milliseconds.

Pure arithmetic over the market's trading intervals (numpy and the standard library only):
building the intervals from exchange_calendars, or the in-house FX week, is
`trader.market.calendars.registry`. The expected starts themselves are
`trader.market.calendars.bar_grid`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trader.domain import Timeframe
from trader.market.calendars.bar_grid import BarStarts, bar_grid
from trader.market.calendars.bars_per_year import BarsPerYear, bars_per_year
from trader.market.calendars.trading_time import TradingTime
from trader.market.calendars.units import DAY_MS, Anchor, Int64s, iso

# `last_bar_ends` where `last_bar_end` is None (no bar of the span has ended by then).
NO_BAR_END = np.iinfo(np.int64).min


class CalendarRangeError(ValueError):
    """A time outside the span the calendar was built for."""


def _checked(
    name: str, intervals_ms: ArrayLike, labels_ms: ArrayLike, begin_ms: int, end_ms: int
) -> tuple[tuple[Int64s, Int64s], Int64s]:
    """The trading intervals as (opens, closes) and the session labels, once they are valid."""
    intervals = np.asarray(intervals_ms, dtype=np.int64).reshape(-1, 2)
    labels = np.asarray(labels_ms, dtype=np.int64).reshape(-1)
    if begin_ms >= end_ms:
        raise ValueError(f"{name}: empty span {iso(begin_ms)} .. {iso(end_ms)}")
    opens, closes = intervals[:, 0].copy(), intervals[:, 1].copy()
    if np.any(opens >= closes) or np.any(closes[:-1] > opens[1:]):
        raise ValueError(f"{name}: trading intervals must be non-empty, sorted and disjoint")
    if np.any(np.diff(labels) <= 0) or np.any(labels % DAY_MS != 0):
        raise ValueError(f"{name}: session labels must be sorted, distinct UTC midnights")
    return (opens, closes), labels


class TradingCalendar:
    """A market's sessions over a span, and the bars a timeframe expects in them.

    Built from sorted, disjoint trading intervals [open, close) in epoch ms (a lunch break splits
    a session in two), the sessions' date labels (epoch ms of 00:00 UTC of each session's date)
    and the span [begin, end) it is valid for. Intervals and labels may reach past the span (so
    its edges are right); expected bars are only those starting inside it.

    Intraday bars start on the UTC clock grid and overlap an interval (`anchor="clock"`), or at
    every interval's open + k x timeframe (`"session"`). A bar ends one timeframe after its start,
    as everywhere else in the daemon (a shortened last bar of a session included). `1d` expects
    one bar per session, stamped with its date label; `1w` the Monday of every week holding a
    session. A continuous market expects every grid point and has no span (`span_ms` None).
    `has_breaks` says a session holds a break (bars_per_year names it). `known_until_ms`: the
    close of the last session the library knows, the regular week past it (None: all known).
    """

    def __init__(
        self,
        name: str,
        timezone: str,
        intervals_ms: ArrayLike,
        session_labels_ms: ArrayLike,
        begin_ms: int,
        end_ms: int,
        *,
        anchor: Anchor = "clock",
        has_breaks: bool = False,
        known_until_ms: int | None = None,
    ) -> None:
        intervals, labels = _checked(name, intervals_ms, session_labels_ms, begin_ms, end_ms)
        self._init(name, timezone, anchor, False, intervals, labels, (begin_ms, end_ms))
        self.has_breaks, self.known_until_ms = has_breaks, known_until_ms

    @classmethod
    def always_open(cls, name: str = "continuous") -> TradingCalendar:
        """A 24/7 market: every grid point is a bar, at any time."""
        calendar = cls.__new__(cls)
        empty = np.zeros(0, dtype=np.int64)
        calendar._init(name, "UTC", "clock", True, (empty, empty), empty, None)
        calendar.has_breaks, calendar.known_until_ms = False, None
        return calendar

    def _init(
        self,
        name: str,
        timezone: str,
        anchor: Anchor,
        continuous: bool,
        intervals: tuple[Int64s, Int64s],
        labels: Int64s,
        span: tuple[int, int] | None,
    ) -> None:
        if anchor not in ("clock", "session"):
            raise ValueError(f"anchor must be 'clock' or 'session', not {anchor!r}")
        self.name = name
        self.timezone = timezone
        self.anchor: Anchor = anchor
        self.continuous = continuous
        self._intervals = intervals  # (opens, closes)
        self._labels = labels
        self.span_ms = span
        self._starts: dict[tuple[int, bool], BarStarts] = {}
        self._anchored: dict[str, TradingCalendar] = {}
        # Trading time inside the span, for session_ms_between.
        self._trading = TradingTime(intervals, span) if span is not None else None

    def __repr__(self) -> str:
        span = (
            "unbounded"
            if self.span_ms is None
            else f"{iso(self.span_ms[0])} .. {iso(self.span_ms[1])}"
        )
        return f"TradingCalendar({self.name!r}, {self.timezone}, anchor={self.anchor}, {span})"

    @property
    def intervals_ms(self) -> Int64s:
        """The trading intervals, one row [open, close) each (a read-only view)."""
        view = np.stack(self._intervals, axis=1)
        view.flags.writeable = False
        return view

    @property
    def session_labels_ms(self) -> Int64s:
        view = self._labels.view()
        view.flags.writeable = False
        return view

    def with_anchor(self, anchor: Anchor) -> TradingCalendar:
        """The same sessions with intraday bars anchored on the clock or at session opens."""
        if anchor == self.anchor:
            return self
        if anchor not in self._anchored:
            other = type(self).__new__(type(self))
            other._init(
                self.name,
                self.timezone,
                anchor,
                self.continuous,
                self._intervals,
                self._labels,
                self.span_ms,
            )
            other.has_breaks, other.known_until_ms = self.has_breaks, self.known_until_ms
            self._anchored[anchor] = other
        return self._anchored[anchor]

    # -- span -----------------------------------------------------------------------------

    def covers(self, begin_ms: int, end_ms: int) -> bool:
        if self.span_ms is None:
            return True
        return self.span_ms[0] <= begin_ms and end_ms <= self.span_ms[1]

    def _need(self, lo: int, hi: int) -> None:
        if not self.covers(lo, hi):
            assert self.span_ms is not None
            asked = iso(lo) if lo == hi else f"{iso(lo)} .. {iso(hi)}"
            raise CalendarRangeError(
                f"{self.name} calendar spans {iso(self.span_ms[0])} .. {iso(self.span_ms[1])}"
                f" UTC; asked about {asked}"
            )

    # -- expected bar starts ----------------------------------------------------------------

    def _grid(self, timeframe: Timeframe) -> BarStarts:
        key = (timeframe.seconds, timeframe.text.endswith("w"))
        starts = self._starts.get(key)
        if starts is None:
            starts = bar_grid(
                self.name, timeframe, self._intervals, self._labels, self.span_ms, self.anchor
            )
            self._starts[key] = starts
        return starts

    def bar_starts(self, timeframe: Timeframe, begin_ms: int, end_ms: int) -> Int64s:
        """Expected bar starts in [begin, end), sorted."""
        self._need(begin_ms, end_ms)
        grid = self._grid(timeframe)
        return grid.take(grid.below(begin_ms), max(grid.below(begin_ms), grid.below(end_ms)))

    def count_bar_starts(self, timeframe: Timeframe, begin_ms: int, end_ms: int) -> int:
        """How many bars are expected to start in [begin, end)."""
        self._need(begin_ms, end_ms)
        grid = self._grid(timeframe)
        return max(0, grid.below(end_ms) - grid.below(begin_ms))

    def is_bar_start(self, timeframe: Timeframe, start_ms: int) -> bool:
        self._need(start_ms, start_ms + 1)
        grid = self._grid(timeframe)
        return grid.below(start_ms + 1) > grid.below(start_ms)

    def expected_mask(self, timeframe: Timeframe, starts_ms: ArrayLike) -> NDArray[np.bool_]:
        """For each time, whether a bar is expected to start there (vectorised is_bar_start)."""
        times = np.asarray(starts_ms, dtype=np.int64)
        if times.size == 0:
            return np.zeros(0, dtype=np.bool_)
        self._need(int(times.min()), int(times.max()) + 1)
        grid = self._grid(timeframe)
        return np.asarray(grid.below_many(times + 1) > grid.below_many(times))

    def missing_between(self, timeframe: Timeframe, after_ms: int, before_ms: int) -> int:
        """Expected starts strictly between two bar starts: 0 when the bars are consecutive."""
        if before_ms < after_ms:
            raise ValueError(f"bar {iso(before_ms)} comes before bar {iso(after_ms)}")
        self._need(after_ms, before_ms)
        grid = self._grid(timeframe)
        return max(0, grid.below(before_ms) - grid.below(after_ms + 1))

    def missing_between_many(
        self, timeframe: Timeframe, after_ms: ArrayLike, before_ms: ArrayLike
    ) -> Int64s:
        """`missing_between` of each pair (vectorised)."""
        after = np.asarray(after_ms, dtype=np.int64)
        before = np.asarray(before_ms, dtype=np.int64)
        if after.size == 0:
            return np.zeros(0, dtype=np.int64)
        if np.any(before < after):
            raise ValueError("a bar comes before the one it should follow")
        self._need(int(after.min()), int(before.max()))
        grid = self._grid(timeframe)
        missing: Int64s = np.maximum(0, grid.below_many(before) - grid.below_many(after + 1))
        return missing

    def missing_before(self, timeframe: Timeframe, starts_ms: ArrayLike) -> Int64s:
        """For each bar of a run of ascending bar starts, the expected starts missing between
        it and the bar before (vectorised missing_between; 0 for the first bar)."""
        times = np.asarray(starts_ms, dtype=np.int64)
        if times.size == 0:
            return np.zeros(0, dtype=np.int64)
        if np.any(np.diff(times) < 0):
            raise ValueError("bar starts are not in ascending order")
        gaps = self.missing_between_many(timeframe, times[:-1], times[1:])
        return np.concatenate([[0], gaps]).astype(np.int64)

    # -- bar ends ---------------------------------------------------------------------------

    def next_bar_end(self, timeframe: Timeframe, after_ms: int) -> int:
        """The first expected bar end strictly after `after_ms` (when to tick next)."""
        self._need(after_ms, after_ms)
        grid = self._grid(timeframe)
        k = grid.below(after_ms - grid.step + 1)
        if grid.bounded and k >= grid.total:
            raise CalendarRangeError(
                f"{self.name} calendar has no {timeframe} bar ending after {iso(after_ms)}"
                f" within its span (to {iso(self._bounds()[1])})"
            )
        return grid.at(k) + grid.step

    def last_bar_end(self, timeframe: Timeframe, at_ms: int) -> int | None:
        """The latest expected bar end <= `at_ms` (the newest bar that should have closed);
        None when no bar of the span has ended by then."""
        self._need(at_ms, at_ms)
        grid = self._grid(timeframe)
        k = grid.below(at_ms - grid.step + 1) - 1
        if grid.bounded and k < 0:
            return None
        return grid.at(k) + grid.step

    def last_bar_ends(self, timeframe: Timeframe, at_ms: ArrayLike) -> Int64s:
        """`last_bar_end` of each time (vectorised), `NO_BAR_END` where it is None."""
        times = np.asarray(at_ms, dtype=np.int64)
        if times.size == 0:
            return np.zeros(0, dtype=np.int64)
        self._need(int(times.min()), int(times.max()))
        grid = self._grid(timeframe)
        k = grid.below_many(times - grid.step + 1) - 1
        if not grid.bounded:
            return grid.at_many(k) + grid.step
        if grid.total == 0:
            return np.full(times.shape, NO_BAR_END, dtype=np.int64)
        ends = grid.at_many(np.maximum(k, 0)) + grid.step
        return np.where(k < 0, NO_BAR_END, ends).astype(np.int64)

    def bar_start_before(self, timeframe: Timeframe, end_ms: int, n: int) -> int:
        """Start of the n-th expected bar counting back from the last one ending <= `end_ms`
        (n=1: that bar): where a fetch of the last n bars begins."""
        if n < 1:
            raise ValueError(f"n must be at least 1, not {n}")
        self._need(end_ms, end_ms)
        grid = self._grid(timeframe)
        k = grid.below(end_ms - grid.step + 1) - n
        if grid.bounded and k < 0:
            raise CalendarRangeError(
                f"{self.name} calendar holds fewer than {n} {timeframe} bars ending by"
                f" {iso(end_ms)} within its span (from {iso(self._bounds()[0])})"
            )
        return grid.at(k)

    def bar_end_after(self, timeframe: Timeframe, at_ms: int, n: int) -> int:
        """End of the n-th expected bar starting at or after `at_ms` (an order valid for n bars
        of session time expires there)."""
        if n < 1:
            raise ValueError(f"n must be at least 1, not {n}")
        self._need(at_ms, at_ms)
        grid = self._grid(timeframe)
        k = grid.below(at_ms) + n - 1
        if grid.bounded and k >= grid.total:
            raise CalendarRangeError(
                f"{self.name} calendar holds fewer than {n} {timeframe} bars from {iso(at_ms)}"
                f" within its span (to {iso(self._bounds()[1])})"
            )
        return grid.at(k) + grid.step

    def _bounds(self) -> tuple[int, int]:
        assert self.span_ms is not None
        return self.span_ms

    # -- session time and annualisation -----------------------------------------------------

    def session_ms_between(self, a_ms: int, b_ms: int) -> int:
        """Trading time inside [a, b), in ms."""
        if b_ms < a_ms:
            raise ValueError(f"{iso(b_ms)} comes before {iso(a_ms)}")
        if self.continuous:
            return b_ms - a_ms
        self._need(a_ms, b_ms)
        assert self._trading is not None  # every calendar but a continuous one has a span
        return self._trading.between(a_ms, b_ms)

    def in_session(self, at_ms: int) -> bool:
        """Whether the market trades at `at_ms`: inside an interval [open, close) (a lunch
        break, a night, a weekend or a holiday is not); a continuous market always does."""
        if self.continuous:
            return True
        self._need(at_ms, at_ms)
        opens, closes = self._intervals
        i = int(np.searchsorted(opens, at_ms, side="right")) - 1
        return i >= 0 and at_ms < int(closes[i])

    def bars_per_year(self, timeframe: Timeframe) -> BarsPerYear:
        """Expected bars a year: 24/7 arithmetic, or the average over the whole calendar years
        of the span (a short file still gets its exchange's full-year figure)."""
        grid = self._grid(timeframe)
        return bars_per_year(
            self.name, timeframe, grid, self._labels, self.span_ms, self.has_breaks
        )
