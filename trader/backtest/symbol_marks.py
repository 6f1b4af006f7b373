"""A symbol's bar closes at the backtest's ticks, looked up as the engine marks them, and the
modelled quote's half-spread there (moved out of `run` unchanged)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trader.backtest.windows import SymbolWindows, epoch_ms
from trader.domain import Bar
from trader.market.quotes import SpreadModel


class SymbolMarks:
    """A symbol's closes, looked up as the engine marks: the last close at or before a time."""

    def __init__(self, windows: SymbolWindows, spread: SpreadModel) -> None:
        bars = [b for b in windows.bars if b is not None]
        self.bars = bars
        self.ends = np.array([epoch_ms(b) for b in bars], dtype=np.int64)
        self.close = np.array([b.close for b in bars], dtype=np.float64)
        self.spread = spread

    def at(self, ticks_ms: np.ndarray) -> np.ndarray:
        index = np.searchsorted(self.ends, ticks_ms, side="right") - 1
        return self.close[np.maximum(index, 0)]

    def half_spread(self, tick_ms: int) -> float:
        """The modelled quote's half-spread at a tick, as a fraction of the mid."""
        index = int(np.searchsorted(self.ends, tick_ms, side="right"))
        recent: Sequence[Bar] = self.bars[max(0, index - 2) : index]
        return self.spread.spread_bps(recent) / 20_000
