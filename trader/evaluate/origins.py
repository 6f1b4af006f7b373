"""Where forecasts are made and what came after them, in the market's own time.

An origin is a bar close at which the engine would forecast the symbol (a full window of
`context` valid bars, contiguous enough by the gap policy: the backtest's `SymbolWindows`).
Step k of its forecast is the k-th bar its calendar expects after it: the morning's first bar
follows the previous session's last one, a lunch break is not a gap. An origin is scored only
when all `horizon` bars after it are in the file with none missing between them by the
calendar, so every step compares the forecast with the bar it was meant for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from trader.backtest.windows import SymbolWindows, epoch_ms
from trader.market.calendars.calendar import TradingCalendar


@dataclass(frozen=True)
class Origins:
    """One symbol's scored origins, oldest first."""

    symbol: str
    ends_ms: list[int]  # close of each origin's last bar: its window's key
    last: np.ndarray  # [origin]: the close the forecast was made at
    realised: np.ndarray  # [origin, step]: the closes that came
    candidates: int  # origins in the period with a window
    incomplete: int  # ... left out: the data ends, or a bar is missing, within the horizon
    spacing: int  # bars between chosen origins (1: every bar)


def _complete_after(windows: SymbolWindows, calendar: TradingCalendar, horizon: int) -> np.ndarray:
    """[bar]: whether the `horizon` bars after each bar are all there, none missing between."""
    bars = windows.bars
    n = len(bars)
    step_ms = windows.step_ms
    starts = [epoch_ms(b) - step_ms for b in bars]
    joined = np.zeros(n, dtype=bool)  # bar i+1 follows bar i with nothing missing
    for i in range(n - 1):
        joined[i] = calendar.missing_between(windows.timeframe, starts[i], starts[i + 1]) == 0
    # a run of `horizon` joins starting at i
    runs = np.zeros(n + 1, dtype=np.int64)
    for i in range(n - 2, -1, -1):
        runs[i] = runs[i + 1] + 1 if joined[i] else 0
    return runs[:n] >= horizon


def select_origins(
    windows: SymbolWindows,
    calendar: TradingCalendar,
    *,
    horizon: int,
    begin: datetime | None,
    end: datetime | None,
    count: int | None,
) -> Origins:
    """Every origin in [begin, end] with a complete outcome, or `count` of them evenly spaced
    (whole bars apart) over the period."""
    lo = -(2**62) if begin is None else int(begin.timestamp() * 1000)
    hi = 2**62 if end is None else int(end.timestamp() * 1000)
    in_period = [w for end_ms, w in sorted(windows.by_end.items()) if lo <= end_ms <= hi]
    complete = _complete_after(windows, calendar, horizon)
    usable = [w for w in in_period if complete[w.last]]
    spacing = 1
    if count is not None and len(usable) > count:
        spacing = max(1, len(usable) // count)
        usable = usable[::spacing][:count]
    closes = np.array([b.close for b in windows.bars], dtype=np.float64)
    index = np.array([w.last for w in usable], dtype=np.int64).reshape(-1, 1)
    realised = closes[index + np.arange(1, horizon + 1)] if usable else np.zeros((0, horizon))
    return Origins(
        windows.symbol,
        [w.end_ms for w in usable],
        closes[index[:, 0]] if usable else np.zeros(0),
        realised,
        len(in_period),
        len(in_period) - sum(1 for w in in_period if complete[w.last]),
        spacing,
    )
