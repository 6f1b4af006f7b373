"""The ticks a compile benchmark runs: what a daemon's inference worker sees over a day.

Every tick one new bar has closed (the windows slide); most ticks forecast every symbol on a
full context, some see a symbol skipped (a stale quote), a short context (a new listing, a
refilled gap) or a longer horizon. Shapes repeat, as ticks do. The first tick is the warm-up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trader.domain import Bar, Timeframe
from trader.forecast.oneshot import read_bars
from trader.forecast.protocol import ForecastRequest
from trader.forecast.random_weights import random_walk_bars

SYMBOLS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
TICKS = {"quick": 8, "production-check": 40}  # after the warm-up tick
# (symbols forecast, share of the full context) per tick, cycled: mostly full ticks.
_PATTERN = ((3, 1.0), (3, 1.0), (2, 1.0), (3, 0.875), (3, 1.0), (1, 1.0), (3, 0.625), (3, 1.0))
_END = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Part:
    """One symbol's part of a tick."""

    symbol: int  # index into SYMBOLS
    context: int
    horizon: int


@dataclass(frozen=True)
class Workload:
    ticks: tuple[tuple[Part, ...], ...]  # ticks[0] is the warm-up
    timeframe: str
    data: str | None  # a recording, or None for random walks

    @property
    def longest(self) -> int:
        return max(f.context for tick in self.ticks for f in tick)


def workload(
    mode: str, context: int, horizons: Sequence[int], timeframe: str, data: Path | None
) -> Workload:
    ticks = []
    for t in range(TICKS[mode] + 1):
        count, share = _PATTERN[t % len(_PATTERN)]
        horizon = horizons[(t // len(_PATTERN)) % len(horizons)] if t else horizons[0]
        length = max(16, int(context * share))
        ticks.append(tuple(Part(s, length, horizon) for s in range(count)))
    return Workload(tuple(ticks), timeframe, None if data is None else str(data))


class Series:
    """Each symbol's bars: a recording's, 500 bars apart per symbol, or a random walk."""

    def __init__(self, work: Workload) -> None:
        self.work = work
        needed = work.longest + len(work.ticks)
        timeframe = Timeframe(work.timeframe)
        if work.data is not None:
            bars, _ = read_bars(Path(work.data), None)
            if len(bars) < needed + 500 * (len(SYMBOLS) - 1):
                raise ValueError(f"{work.data}: too few bars ({len(bars)}) for this workload")
            self.bars = [
                [_as(symbol, b) for b in bars[len(bars) - 500 * i - needed : len(bars) - 500 * i]]
                for i, symbol in enumerate(SYMBOLS)
            ]
        else:
            self.bars = [
                random_walk_bars(symbol, needed, timeframe=timeframe, end=_END, seed=i)
                for i, symbol in enumerate(SYMBOLS)
            ]

    def requests(self, tick: int, levels: Sequence[float]) -> list[ForecastRequest]:
        """Tick `tick`'s requests: each window ends `tick` bars after the first tick's."""
        out = []
        for part in self.work.ticks[tick]:
            series = self.bars[part.symbol]
            end = len(series) - (len(self.work.ticks) - 1 - tick)
            window = series[end - part.context : end]
            out.append(ForecastRequest(SYMBOLS[part.symbol], window, part.horizon, levels))
        return out


def _as(symbol: str, bar: Bar) -> Bar:
    return dataclasses.replace(bar, symbol=symbol)
