"""The rolling window of a symbol's most recent closed bars: the model's context.

It also knows how many of its newest bars are contiguous: none missing between them by the
market's calendar (a session break is not missing; a bar the venue never had, or one dropped as
invalid, is). The data step tells it, bar by bar, whether a hole came before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from datetime import datetime

from trader.domain import Bar, DomainError


class BarWindow:
    def __init__(self, symbol: str, capacity: int, bars: Iterable[Bar] = ()) -> None:
        self.symbol = symbol
        self._bars: deque[Bar] = deque(maxlen=capacity)
        self.contiguous = 0  # newest bars in a row, nothing missing between them
        self.hole_before: datetime | None = None  # start of the first bar after the last hole
        self.extend(bars)

    @property
    def capacity(self) -> int:
        assert self._bars.maxlen is not None
        return self._bars.maxlen

    @property
    def last(self) -> Bar | None:
        return self._bars[-1] if self._bars else None

    @property
    def full(self) -> bool:
        return len(self._bars) == self.capacity

    def __len__(self) -> int:
        return len(self._bars)

    def add(self, bar: Bar, *, after_hole: bool) -> None:
        """Append a newer bar; the oldest falls off the front when the window is full."""
        if bar.symbol != self.symbol:
            raise DomainError(f"{bar.symbol} bar in the {self.symbol} window")
        if self._bars and bar.start <= self._bars[-1].start:
            raise DomainError(f"{self.symbol}: bar at {bar.start} is not after the window")
        if after_hole and self._bars:
            self.contiguous, self.hole_before = 1, bar.start
        else:
            self.contiguous += 1
        self._bars.append(bar)

    def extend(self, bars: Iterable[Bar]) -> None:
        """Append newer bars known to follow one another (a test's, or a ledger's reload
        whose holes the caller marks with `add`)."""
        for bar in bars:
            self.add(bar, after_hole=False)

    def bounds_after(self, added: Sequence[Bar]) -> tuple[Bar, Bar, int] | None:
        """The first and last bar and the length the window will have once `added` joins it
        (None: it will be empty), without adding them."""
        bars = self._bars
        held = len(bars)
        total = held + len(added)
        length = min(total, self.capacity)
        if length == 0:
            return None
        start = total - length  # where the first bar kept is, in the window then `added`
        first = bars[start] if start < held else added[start - held]
        return first, added[-1] if added else bars[-1], length

    def since(self, start: datetime | None) -> list[Bar]:
        """The bars that started after `start` (all of them for None), oldest first."""
        newer: list[Bar] = []
        for bar in reversed(self._bars):
            if start is not None and bar.start <= start:
                break
            newer.append(bar)
        newer.reverse()
        return newer

    def snapshot(self) -> tuple[Bar, ...]:
        return tuple(self._bars)
