"""A market's trading calendar: which bars a timeframe expects, as integer epoch milliseconds.

Pure arithmetic over the market's trading intervals (numpy and the standard library only):
building the intervals from exchange_calendars, or the in-house FX week, is
`trader.market.calendars`. Expected bar starts are held as arithmetic runs (first, count, one
step), so a query is a binary search and an array of starts is only made when asked for.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trader.domain import Timeframe

Anchor = Literal["clock", "session"]
Int64s = NDArray[np.int64]

DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
# Timeframe.floor's weekly grid starts on Monday 1969-12-29, three days before the epoch.
WEEK_ORIGIN_MS = -3 * DAY_MS
YEAR_DAYS = 365.25


class CalendarRangeError(ValueError):
    """A time outside the span the calendar was built for."""


@dataclass(frozen=True, slots=True)
class BarsPerYear:
    periods: float
    explanation: str


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _number(value: float) -> str:
    """11,630 or 251.7: whole numbers once the fraction stops mattering."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def _trim(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".")


class _Starts(Protocol):
    """Expected bar starts, indexed in order; `below(x)` is the index of the first start >= x."""

    step: int
    bounded: bool
    total: int

    def below(self, x: int) -> int: ...
    def below_many(self, x: Int64s) -> Int64s: ...
    def at(self, k: int) -> int: ...
    def take(self, lo: int, hi: int) -> Int64s: ...


class _Lattice:
    """Every `phase + k * step`, k any integer: a continuous market's grid, never materialised."""

    bounded = False
    total = 0

    def __init__(self, phase: int, step: int) -> None:
        self.phase = phase
        self.step = step

    def below(self, x: int) -> int:
        return _ceil_div(x - self.phase, self.step)

    def below_many(self, x: Int64s) -> Int64s:
        return -((self.phase - x) // self.step)

    def at(self, k: int) -> int:
        return self.phase + k * self.step

    def take(self, lo: int, hi: int) -> Int64s:
        return self.phase + np.arange(lo, hi, dtype=np.int64) * self.step


class _Runs:
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
        return int(self._before[i] + min(self._count[i], _ceil_div(x - self._first[i], self.step)))

    def below_many(self, x: Int64s) -> Int64s:
        i = np.searchsorted(self.first, x, "left") - 1
        safe = np.maximum(i, 0)
        inside = np.minimum(self.count[safe], -((self.first[safe] - x) // self.step))
        return np.where(i < 0, 0, self.before[safe] + inside).astype(np.int64)

    def at(self, k: int) -> int:
        i = bisect_right(self._before, k) - 1
        return int(self._first[i] + (k - self._before[i]) * self.step)

    def take(self, lo: int, hi: int) -> Int64s:
        index = np.arange(lo, hi, dtype=np.int64)
        run = np.searchsorted(self.before, index, "right") - 1
        return (self.first[run] + (index - self.before[run]) * self.step).astype(np.int64)


def _lattice_runs(
    k_first: Int64s, k_last: Int64s, phase: int, step: int, span: tuple[int, int]
) -> _Runs:
    """Runs from ranges [k_first, k_last] of grid indices (sorted by k_first), clipped to the
    span; ranges that share or touch a grid point merge, so a bar over two intervals counts once."""
    k_min = _ceil_div(span[0] - phase, step)
    k_max = _ceil_div(span[1] - phase, step) - 1
    lo = np.maximum(k_first, k_min)
    hi = np.minimum(k_last, k_max)
    keep = lo <= hi
    lo, hi = lo[keep], hi[keep]
    if lo.size == 0:
        return _Runs(lo, lo, step)
    reach = np.maximum.accumulate(hi)
    new = np.concatenate(([True], lo[1:] > reach[:-1] + 1))
    heads = np.flatnonzero(new)
    first = lo[heads]
    last = np.maximum.reduceat(hi, heads)
    return _Runs(phase + first * step, last - first + 1, step)


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
    `has_breaks` says a session holds a break (bars_per_year names it).
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
    ) -> None:
        intervals = np.asarray(intervals_ms, dtype=np.int64).reshape(-1, 2)
        labels = np.asarray(session_labels_ms, dtype=np.int64).reshape(-1)
        if begin_ms >= end_ms:
            raise ValueError(f"{name}: empty span {_iso(begin_ms)} .. {_iso(end_ms)}")
        opens, closes = intervals[:, 0].copy(), intervals[:, 1].copy()
        if np.any(opens >= closes) or np.any(closes[:-1] > opens[1:]):
            raise ValueError(f"{name}: trading intervals must be non-empty, sorted and disjoint")
        if np.any(np.diff(labels) <= 0) or np.any(labels % DAY_MS != 0):
            raise ValueError(f"{name}: session labels must be sorted, distinct UTC midnights")
        self._init(name, timezone, anchor, False, (opens, closes), labels, (begin_ms, end_ms))
        self.has_breaks = has_breaks

    @classmethod
    def always_open(cls, name: str = "continuous") -> TradingCalendar:
        """A 24/7 market: every grid point is a bar, at any time."""
        calendar = cls.__new__(cls)
        empty = np.zeros(0, dtype=np.int64)
        calendar._init(name, "UTC", "clock", True, (empty, empty), empty, None)
        calendar.has_breaks = False
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
        self._opens, self._closes = intervals
        self._labels = labels
        self.span_ms = span
        self._starts: dict[tuple[int, bool], _Starts] = {}
        self._anchored: dict[str, TradingCalendar] = {}
        if span is not None:
            # Trading time inside the span, for session_ms_between.
            opens = np.clip(self._opens, *span)
            closes = np.clip(self._closes, *span)
            keep = closes > opens
            self._trade_opens = opens[keep].tolist()
            self._trade_lengths = (closes - opens)[keep].tolist()
            self._trade_before = np.concatenate(
                ([0], np.cumsum(closes[keep] - opens[keep]))
            ).tolist()

    def __repr__(self) -> str:
        span = (
            "unbounded"
            if self.span_ms is None
            else f"{_iso(self.span_ms[0])} .. {_iso(self.span_ms[1])}"
        )
        return f"TradingCalendar({self.name!r}, {self.timezone}, anchor={self.anchor}, {span})"

    @property
    def intervals_ms(self) -> Int64s:
        """The trading intervals, one row [open, close) each (a read-only view)."""
        view = np.stack([self._opens, self._closes], axis=1)
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
                (self._opens, self._closes),
                self._labels,
                self.span_ms,
            )
            other.has_breaks = self.has_breaks
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
            asked = _iso(lo) if lo == hi else f"{_iso(lo)} .. {_iso(hi)}"
            raise CalendarRangeError(
                f"{self.name} calendar spans {_iso(self.span_ms[0])} .. {_iso(self.span_ms[1])}"
                f" UTC; asked about {asked}"
            )

    # -- expected bar starts ----------------------------------------------------------------

    def _grid(self, timeframe: Timeframe) -> _Starts:
        weekly = timeframe.text.endswith("w")
        key = (timeframe.seconds, weekly)
        starts = self._starts.get(key)
        if starts is None:
            starts = self._starts[key] = self._make_grid(timeframe, weekly)
        return starts

    def _make_grid(self, timeframe: Timeframe, weekly: bool) -> _Starts:
        step = timeframe.seconds * 1000
        if self.span_ms is None:
            return _Lattice(WEEK_ORIGIN_MS if weekly else 0, step)
        span = self.span_ms
        if weekly and step == WEEK_MS:
            weeks = np.unique((self._labels - WEEK_ORIGIN_MS) // WEEK_MS)
            return _lattice_runs(weeks, weeks, WEEK_ORIGIN_MS, WEEK_MS, span)
        if step == DAY_MS:
            days = self._labels // DAY_MS
            return _lattice_runs(days, days, 0, DAY_MS, span)
        if step > DAY_MS or weekly:
            raise ValueError(
                f"{self.name}: a {timeframe} timeframe has no expected bars on a session calendar;"
                " intraday timeframes, 1d and 1w do"
            )
        if self.anchor == "clock":
            return _lattice_runs(self._opens // step, (self._closes - 1) // step, 0, step, span)
        # Each interval's own grid, from its open; the part before the span is skipped.
        skip = np.maximum(0, -((self._opens - span[0]) // step))
        first = self._opens + skip * step
        count = -((self._opens - self._closes) // step) - skip
        count = np.minimum(count, -((first - span[1]) // step))
        return _Runs(first, count, step)

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
            raise ValueError(f"bar {_iso(before_ms)} comes before bar {_iso(after_ms)}")
        self._need(after_ms, before_ms)
        grid = self._grid(timeframe)
        return max(0, grid.below(before_ms) - grid.below(after_ms + 1))

    # -- bar ends ---------------------------------------------------------------------------

    def next_bar_end(self, timeframe: Timeframe, after_ms: int) -> int:
        """The first expected bar end strictly after `after_ms` (when to tick next)."""
        self._need(after_ms, after_ms)
        grid = self._grid(timeframe)
        k = grid.below(after_ms - grid.step + 1)
        if grid.bounded and k >= grid.total:
            raise CalendarRangeError(
                f"{self.name} calendar has no {timeframe} bar ending after {_iso(after_ms)}"
                f" within its span (to {_iso(self._end())})"
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
                f" {_iso(end_ms)} within its span (from {_iso(self._begin())})"
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
                f"{self.name} calendar holds fewer than {n} {timeframe} bars from {_iso(at_ms)}"
                f" within its span (to {_iso(self._end())})"
            )
        return grid.at(k) + grid.step

    def _begin(self) -> int:
        assert self.span_ms is not None
        return self.span_ms[0]

    def _end(self) -> int:
        assert self.span_ms is not None
        return self.span_ms[1]

    # -- session time -----------------------------------------------------------------------

    def session_ms_between(self, a_ms: int, b_ms: int) -> int:
        """Trading time inside [a, b), in ms."""
        if b_ms < a_ms:
            raise ValueError(f"{_iso(b_ms)} comes before {_iso(a_ms)}")
        if self.continuous:
            return b_ms - a_ms
        self._need(a_ms, b_ms)
        return self._traded_before(b_ms) - self._traded_before(a_ms)

    def _traded_before(self, x: int) -> int:
        i = bisect_right(self._trade_opens, x) - 1
        if i < 0:
            return 0
        inside = min(x - self._trade_opens[i], self._trade_lengths[i])
        return int(self._trade_before[i] + inside)

    # -- annualisation ----------------------------------------------------------------------

    def bars_per_year(self, timeframe: Timeframe) -> BarsPerYear:
        """Expected bars a year: 24/7 arithmetic, or the average over the whole calendar years
        of the span (a short file still gets its exchange's full-year figure)."""
        step = timeframe.seconds * 1000
        if self.span_ms is None:
            periods = YEAR_DAYS * DAY_MS / step
            if step <= DAY_MS:
                shape = f"{YEAR_DAYS} days x {_trim(DAY_MS / step)} bars of {timeframe} a day"
            else:
                shape = f"{YEAR_DAYS} days / {_trim(step / DAY_MS)} days a bar of {timeframe}"
            return BarsPerYear(periods, f"24/7 market: {shape} = {_number(periods)} bars a year")
        grid = self._grid(timeframe)
        begin, end = self.span_ms
        first_year = datetime.fromtimestamp(begin / 1000, UTC).year
        if _year_start(first_year) < begin:
            first_year += 1
        last_year = datetime.fromtimestamp(end / 1000, UTC).year - 1
        if last_year >= first_year:
            lo, hi = _year_start(first_year), _year_start(last_year + 1)
            years = float(last_year - first_year + 1)
            when = str(first_year) if years == 1 else f"{first_year}-{last_year}"
        else:  # a span clipped short of a whole year (an exchange's bound): extrapolate
            lo, hi = begin, end
            years = (end - begin) / (YEAR_DAYS * DAY_MS)
            when = f"extrapolated from {_iso(begin)[:10]} .. {_iso(end)[:10]}"
        bars = grid.below(hi) - grid.below(lo)
        sessions = int(np.searchsorted(self._labels, hi) - np.searchsorted(self._labels, lo))
        periods = bars / years
        if timeframe.text.endswith("w"):
            shape = f"{periods:.1f} weeks a year with a session x 1 bar of {timeframe}"
        else:
            per_session = _trim(bars / sessions) if sessions else "0"
            breaks = " (lunch break excluded)" if self.has_breaks and step < DAY_MS else ""
            plural = "bar" if per_session == "1" else "bars"
            shape = (
                f"{sessions / years:.1f} sessions a year x {per_session} {plural} of {timeframe}"
                f"{breaks}"
            )
        return BarsPerYear(
            periods, f"{self.name}: {shape} = {_number(periods)} bars a year ({when})"
        )


def _year_start(year: int) -> int:
    return int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) * 1000
