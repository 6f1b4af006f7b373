"""A replay plan's rows and ticks in bulk (`trader.market.replay_plan`'s part): what the data
step and the replay's feed find by bisecting and converting times tick by tick, worked out
for every row and tick at once, exactly as they do it.

Times are exact integers here: epoch microseconds (`epoch_us`, as datetimes compare) and
epoch milliseconds as `to_epoch_ms` reads a datetime (`ms_as_read`: through a float
timestamp, which can land one below a whole millisecond).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from trader.domain import Bar, Timeframe
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.units import Int64s
from trader.market.hygiene import SkipReason

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
QUOTE_ROWS = 3  # the feed's quote reads the last valid closed bars among the newest 3 rows


def epoch_us(at: datetime) -> int:
    """An aware time as whole microseconds since the epoch (exact)."""
    return (at - _EPOCH) // MICROSECOND


def ms_as_read(times_us: Int64s) -> Int64s:
    """`to_epoch_ms` of each time given in epoch microseconds: `int(at.timestamp() * 1000)`,
    the timestamp being the microseconds over 10**6 correctly rounded (as Python divides two
    integers a double holds exactly, |us| < 2**53), then times 1000 and truncated."""
    return (times_us.astype(np.float64) / 1e6 * 1000.0).astype(np.int64)


class PlannedRows:
    """A recording's rows as judged (`parsed`): the valid bars (None for a dropped row), and
    their times as the step reads them."""

    def __init__(
        self, parsed: Sequence[Bar | SkipReason], starts: Sequence[int], step_ms: int
    ) -> None:
        self.bars: list[Bar | None] = [row if isinstance(row, Bar) else None for row in parsed]
        self.starts: Int64s = np.asarray(starts, dtype=np.int64).reshape(-1)
        self.ends_ms: Int64s = self.starts + step_ms  # each row's bar end
        self.ends_us: Int64s = self.ends_ms * 1000  # ... exactly, as `Bar.end` is
        ok = np.fromiter((bar is not None for bar in self.bars), dtype=np.bool_)
        self.valid: Int64s = np.flatnonzero(ok).astype(np.int64)
        # `to_epoch_ms(bar.end)` of every row (the step compares the window's newest with
        # the market's newest bar end), and each end as a datetime's microseconds.
        self.ends_as_read: list[int] = ms_as_read(self.ends_us).tolist()
        self.end_us: list[int] = self.ends_us.tolist()
        # The newest valid row before each row (and before the end): -1 where none.
        newest = np.maximum.accumulate(np.where(ok, np.arange(ok.size), -1)) if ok.size else ok
        self.valid_before: Int64s = np.concatenate(([-1], newest)).astype(np.int64)
        self.valid_before_rows: list[int] = self.valid_before.tolist()


class TickRows:
    """For every tick (epoch microseconds): the rows closed by it (the step's bisection), the
    market's newest expected bar end (`last_bar_end`, `NO_BAR_END` for none), and the
    rows of the modelled quote the feed serves then (`quote_rows`: -1 for none, else
    2 x the newest valid row, + 1 where the valid row before it is in the quote too)."""

    def __init__(
        self,
        rows: PlannedRows,
        calendar: TradingCalendar,
        timeframe: Timeframe,
        ticks_us: Int64s,
    ) -> None:
        ticks_ms = ms_as_read(ticks_us)  # `to_epoch_ms(now)`
        self.closed: list[int] = np.searchsorted(rows.ends_ms, ticks_ms, "right").tolist()
        self.newest_ends: list[int] = calendar.last_bar_ends(timeframe, ticks_ms).tolist()
        # The feed (`ReplayMarketData.top_of_book`): the newest rows begun by the tick (by
        # bisection), of them the valid ones whose bar has ended (`bar.end <= now`).
        begun = np.searchsorted(rows.starts, ticks_ms, "right")
        ended = np.searchsorted(rows.ends_us, ticks_us, "right")
        first = np.maximum(begun - QUOTE_ROWS, 0)
        newest = rows.valid_before[np.minimum(begun, ended)]
        before = rows.valid_before[np.maximum(newest, 0)]
        pair = (before >= first).astype(np.int64)
        self.quote_rows: list[int] = np.where(newest < first, -1, 2 * newest + pair).tolist()
