"""The windows a backtest forecasts, and the batches they are forecast in.

A window is what the engine's data step hands the model at a tick: the `context` most recent
valid closed bars of a symbol, the last of them closing at the tick, when the data step would
trade the symbol then (with `gap_policy = "skip"`, only once enough bars have closed in a row
after a hole, by the market's calendar). Each is identified by a digest of its symbol,
timeframe and bars, so a cached forecast is reused exactly when the model would see the same
input.

Batches are fixed by the clock alone. Slot n of a symbol is the bar closing at
phase + n x timeframe; batch k holds slots kB .. kB+B-1, in that order. A slot with no window
(before the data, at a bad bar, after the end) gets a flat placeholder window whose forecast is
thrown away. The models seed their samplers from the times and symbols of a batch, so a batch
whose members depended on which bars exist, or are valid, would let a later bar change an
earlier forecast: with slots fixed in advance, a window's forecast depends on its own bars only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trader.domain import Bar, from_epoch_ms
from trader.forecast.protocol import ForecastRequest
from trader.market.calendars.calendar import TradingCalendar
from trader.market.hygiene import parse_rows
from trader.market.replay import Recording

DIGEST = 16  # bytes


def epoch_ms(bar: Bar) -> int:
    """When `bar` closed, in milliseconds since the epoch."""
    return int(bar.end.timestamp() * 1000)


@dataclass(frozen=True)
class Window:
    symbol: str
    end_ms: int  # close of its last bar: the tick it is the context of
    first: int  # index of its first bar among the valid bars
    last: int  # index of its last bar
    key: bytes  # digest of symbol, timeframe and every bar


class SymbolWindows:
    """Every window of one recording, parsed once. `min_contiguous`: bars in a row needed
    after a hole (None: the gap policy bridges holes)."""

    def __init__(
        self,
        recording: Recording,
        context: int,
        *,
        calendar: TradingCalendar,
        min_contiguous: int | None,
    ) -> None:
        self.symbol = recording.symbol
        self.timeframe = recording.timeframe
        self.context = context
        self.step_ms = recording.timeframe.seconds * 1000
        # Every row as the data step judges it (a backtest's data plan reads them too).
        self.parsed = parse_rows(recording.rows, recording.symbol, recording.timeframe)
        self.bars: list[Bar] = [b for b in self.parsed if isinstance(b, Bar)]
        header = hashlib.blake2b(
            f"{self.symbol}|{self.timeframe.text}|{context}|".encode(), digest_size=DIGEST
        )
        ends = [epoch_ms(bar) for bar in self.bars]
        digests = memoryview(
            b"".join(
                hashlib.blake2b(_bar_bytes(bar, end), digest_size=DIGEST).digest()
                for bar, end in zip(self.bars, ends, strict=True)
            )
        )
        starts = [end - self.step_ms for end in ends]
        needed = min(min_contiguous, context) if min_contiguous is not None else 1
        missing = calendar.missing_before(self.timeframe, starts).tolist()
        lasts: list[int] = []
        run = 0  # bars in a row ending at this one, nothing missing between them
        for i in range(len(self.bars)):
            run = 1 if i == 0 or missing[i] > 0 else run + 1
            if i + 1 >= context and run >= needed:
                lasts.append(i)
        keys = _window_keys(header, digests, context, lasts)
        self.by_end: dict[int, Window] = {
            ends[i]: Window(self.symbol, ends[i], i - context + 1, i, key)
            for i, key in zip(lasts, keys, strict=True)
        }

    def bars_of(self, window: Window) -> tuple[Bar, ...]:
        return tuple(self.bars[window.first : window.last + 1])

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


def _window_keys(
    header: hashlib.blake2b, digests: memoryview, context: int, lasts: Sequence[int]
) -> list[bytes]:
    """Each window's key: the digest of the header and its bars' digests (a window ending at
    bar i holds `context` bars). Hashing a window's digests releases the GIL, so threads share
    the work across the cores (about 8 kB a window of 512 bars, hundreds of MB a recording)."""

    def keys(part: Sequence[int]) -> list[bytes]:
        found = []
        for last in part:
            digest = header.copy()
            digest.update(digests[(last - context + 1) * DIGEST : (last + 1) * DIGEST])
            found.append(digest.digest())
        return found

    threads = min(os.cpu_count() or 1, 8)
    if threads == 1 or len(lasts) < 1000:
        return keys(lasts)
    size = -(-len(lasts) // threads)
    with ThreadPoolExecutor(threads) as pool:
        parts = pool.map(keys, [lasts[i : i + size] for i in range(0, len(lasts), size)])
        return [key for part in parts for key in part]


def _bar_bytes(bar: Bar, end_ms: int) -> bytes:
    quote_volume = "" if bar.quote_volume is None else repr(bar.quote_volume)
    return (
        f"{end_ms},{bar.open!r},{bar.high!r},{bar.low!r},{bar.close!r},"
        f"{bar.volume!r},{quote_volume}"
    ).encode()
