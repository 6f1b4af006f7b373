"""The windows a backtest forecasts, and the batches they are forecast in.

A window is what the engine's data step hands the model at a tick: the `context` most recent
closed bars of a symbol, valid and consecutive (consecutive in time unless the venue has gaps),
the last of them closing at the tick. Each is identified by a digest of its symbol, timeframe
and bars, so a cached forecast is reused exactly when the model would see the same input.

Batches are fixed by the clock alone. Slot n of a symbol is the bar closing at
phase + n x timeframe; batch k holds slots kB .. kB+B-1, in that order. A slot with no window
(before the data, at a bad bar, after the end) gets a flat placeholder window whose forecast is
thrown away. The models seed their samplers from the times and symbols of a batch, so a batch
whose members depended on which bars exist, or are valid, would let a later bar change an
earlier forecast: with slots fixed in advance, a window's forecast depends on its own bars only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

from trader.domain import Bar, from_epoch_ms
from trader.forecast.protocol import ForecastRequest
from trader.market.hygiene import parse_row
from trader.market.replay import Recording

DIGEST = 16  # bytes


def epoch_ms(bar: Bar) -> int:
    """When `bar` closed, in milliseconds since the epoch."""
    return int(bar.end.timestamp() * 1000)


@dataclass(frozen=True)
class Window:
    symbol: str
    end_ms: int  # close of its last bar: the tick it is the context of
    first: int  # row of its first bar in the recording
    last: int  # row of its last bar
    key: bytes  # digest of symbol, timeframe and every bar


class SymbolWindows:
    """Every window of one recording, parsed once."""

    def __init__(self, recording: Recording, context: int, *, allow_gaps: bool) -> None:
        self.symbol = recording.symbol
        self.timeframe = recording.timeframe
        self.context = context
        self.step_ms = recording.timeframe.seconds * 1000
        parsed = [parse_row(row, recording.symbol, recording.timeframe) for row in recording.rows]
        self.bars: list[Bar | None] = [b if isinstance(b, Bar) else None for b in parsed]
        header = f"{self.symbol}|{self.timeframe.text}|{context}|".encode()
        digests = bytearray()
        self.by_end: dict[int, Window] = {}
        run = 0  # valid consecutive bars ending at this row
        previous: Bar | None = None
        for row, bar in enumerate(self.bars):
            if bar is None:
                digests += bytes(DIGEST)
                run, previous = 0, None
                continue
            digests += hashlib.blake2b(_bar_bytes(bar), digest_size=DIGEST).digest()
            follows = previous is not None and (
                bar.start > previous.start
                if allow_gaps
                else bar.start - previous.start == self.timeframe.duration
            )
            run = run + 1 if follows else 1
            previous = bar
            if run >= context:
                first = row - context + 1
                content = header + bytes(digests[first * DIGEST : (row + 1) * DIGEST])
                key = hashlib.blake2b(content, digest_size=DIGEST).digest()
                end = epoch_ms(bar)
                self.by_end[end] = Window(self.symbol, end, first, row, key)

    def bars_of(self, window: Window) -> tuple[Bar, ...]:
        # Every row of a window is a valid bar (that is what makes it a window).
        return cast(tuple[Bar, ...], tuple(self.bars[window.first : window.last + 1]))

    def request(self, window: Window, horizon: int, quantiles: Sequence[float]) -> ForecastRequest:
        return ForecastRequest(self.symbol, self.bars_of(window), horizon, quantiles)

    def placeholder(self, end_ms: int, horizon: int, quantiles: Sequence[float]) -> ForecastRequest:
        """A flat window closing at `end_ms`, holding a batch slot that has no real window."""
        first = from_epoch_ms(end_ms) - self.timeframe.duration * self.context
        bars = tuple(
            Bar(self.symbol, self.timeframe, first + self.timeframe.duration * i,
                1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
            for i in range(self.context)
        )  # fmt: skip
        return ForecastRequest(self.symbol, bars, horizon, quantiles)

    def batch_slots(self, end_ms: int, size: int) -> list[int]:
        """The close times of the batch that the slot closing at `end_ms` belongs to."""
        phase = end_ms % self.step_ms
        slot = (end_ms - phase) // self.step_ms
        first = slot - slot % size
        return [phase + (first + i) * self.step_ms for i in range(size)]

    def batches(self, ends: Sequence[int], size: int) -> Iterator[list[int]]:
        """The batches (slot close times) that hold the windows closing at `ends`, each once."""
        seen: set[int] = set()
        for end in sorted(ends):
            slots = self.batch_slots(end, size)
            if slots[0] not in seen:
                seen.add(slots[0])
                yield slots


def _bar_bytes(bar: Bar) -> bytes:
    quote_volume = "" if bar.quote_volume is None else repr(bar.quote_volume)
    return (
        f"{epoch_ms(bar)},{bar.open!r},{bar.high!r},{bar.low!r},{bar.close!r},"
        f"{bar.volume!r},{quote_volume}"
    ).encode()
