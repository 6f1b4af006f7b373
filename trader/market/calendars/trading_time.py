"""Trading time between two instants: prefix sums over a calendar's intervals inside its span."""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from trader.market.calendars.units import Int64s


class TradingTime:
    """The trading intervals (opens, closes) clipped to the span [begin, end)."""

    def __init__(self, intervals: tuple[Int64s, Int64s], span: tuple[int, int]) -> None:
        opens = np.clip(intervals[0], *span)
        closes = np.clip(intervals[1], *span)
        keep = closes > opens
        self._opens = opens[keep].tolist()
        self._lengths = (closes - opens)[keep].tolist()
        self._before = np.concatenate(([0], np.cumsum(closes[keep] - opens[keep]))).tolist()

    def between(self, a_ms: int, b_ms: int) -> int:
        """Trading time inside [a, b), in ms (a <= b, both inside the span)."""
        return self._before_ms(b_ms) - self._before_ms(a_ms)

    def _before_ms(self, x: int) -> int:
        i = bisect_right(self._opens, x) - 1
        if i < 0:
            return 0
        inside = min(x - self._opens[i], self._lengths[i])
        return int(self._before[i] + inside)
