"""The bars a fine-tuning run learns from: any number of files (one symbol each), each read as
`trader backtest` reads a recording (its calendar named or inferred, so a session break is not
a hole), with invalid rows dropped and counted, and how many bars in a row end at each bar.

A window is a run of consecutive bars with nothing missing between them by the calendar; one
that would cross a hole (a dropped candle, a NaN row) is skipped and counted, never bridged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from trader.config.market_settings import MarketSettings
from trader.domain import Bar, Timeframe
from trader.market.files.options import ReadOptions
from trader.market.hygiene import parse_row
from trader.market.replay import read_recordings
from trader.market.replay_calendars import replay_calendars

Refs = NDArray[np.int64]  # [N, 2]: (series index, index of the window's first bar)


@dataclass(frozen=True, eq=False)
class Series:
    """One file's valid bars, oldest first."""

    symbol: str
    path: Path
    timeframe: Timeframe
    bars: list[Bar]
    starts_ms: NDArray[np.int64]  # each bar's start
    runs: NDArray[np.int64]  # bars in a row ending at each bar, nothing missing between
    calendar: str
    skipped_rows: Counter[str]  # invalid rows dropped, by reason
    missing_bars: int  # bars the calendar expects that are not in the file (or were dropped)

    def __len__(self) -> int:
        return len(self.bars)


def read_series(
    files: Sequence[Path],
    market: MarketSettings,
    reading: ReadOptions,
    symbols: Sequence[str] = (),
) -> list[Series]:
    """Every file's bars (ReplayDataError / RecordingsRequestError for files that cannot be
    read with confidence, or two files of one symbol)."""
    recordings = {r.symbol: r for r in read_recordings(files, symbols or None, reading)}
    replay = replay_calendars(market, recordings)
    out = []
    for symbol, recording in replay.recordings.items():
        calendar = replay.calendars[symbol]
        bars, skipped = [], Counter[str]()
        for row in recording.rows:
            parsed = parse_row(row, symbol, recording.timeframe)
            if isinstance(parsed, Bar):
                bars.append(parsed)
            else:
                skipped[str(parsed)] += 1
        starts = np.array([int(b.start.timestamp() * 1000) for b in bars], dtype=np.int64)
        missing = calendar.missing_before(recording.timeframe, starts)
        out.append(
            Series(
                symbol, recording.path, recording.timeframe, bars, starts, _runs(missing),
                calendar.name, skipped, int(missing.sum()),
            )
        )  # fmt: skip
    return out


def _runs(missing: NDArray[np.int64]) -> NDArray[np.int64]:
    """Bars in a row ending at each bar: counting restarts at 1 after a hole."""
    runs = np.ones(len(missing), dtype=np.int64)
    for i in range(1, len(missing)):
        if missing[i] == 0:
            runs[i] = runs[i - 1] + 1
    return runs


@dataclass(frozen=True)
class Cut:
    """The windows of one length found in a span of time, and those a hole made skip."""

    refs: Refs
    skipped: int


def windows(
    series: Sequence[Series], length: int, begin_ms: int, end_ms: int, *, begin_at: int = 0
) -> Cut:
    """Every window of `length` consecutive bars whose bar `begin_at` (its first by default)
    starts at or after `begin_ms` and whose last bar starts before `end_ms`."""
    found, skipped = [], 0
    for index, s in enumerate(series):
        if len(s) < length:
            continue
        last = np.arange(length - 1, len(s))
        first = last - length + 1
        inside = (s.starts_ms[first + begin_at] >= begin_ms) & (s.starts_ms[last] < end_ms)
        whole = s.runs[last] >= length
        skipped += int(np.sum(inside & ~whole))
        chosen = first[inside & whole]
        found.append(np.stack([np.full_like(chosen, index), chosen], axis=1))
    refs = np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)
    return Cut(refs.astype(np.int64), skipped)


def origins(series: Sequence[Series], context: int, horizon: int, begin_ms: int) -> Cut:
    """Forecast origins as windows of context + horizon bars whose `horizon` bars ahead all
    start at or after `begin_ms`; the context before them may lie earlier (it is only input)."""
    return windows(series, context + horizon, begin_ms, 2**62, begin_at=context)


def spread(refs: Refs, count: int) -> Refs:
    """At most `count` of `refs`, evenly spaced (all of them when there are fewer)."""
    if len(refs) <= count:
        return refs
    return refs[np.linspace(0, len(refs) - 1, count).round().astype(np.int64)]
