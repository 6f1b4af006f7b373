"""The rolling window of a symbol's most recent closed bars: the model's context."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from datetime import datetime

from trader.domain import Bar, DomainError


class BarWindow:
    def __init__(self, symbol: str, capacity: int, bars: Iterable[Bar] = ()) -> None:
        self.symbol = symbol
        self._bars: deque[Bar] = deque(maxlen=capacity)
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

    def extend(self, bars: Iterable[Bar]) -> None:
        """Append newer bars; older ones fall off the front."""
        for bar in bars:
            if bar.symbol != self.symbol:
                raise DomainError(f"{bar.symbol} bar in the {self.symbol} window")
            if self._bars and bar.start <= self._bars[-1].start:
                raise DomainError(f"{self.symbol}: bar at {bar.start} is not after the window")
            self._bars.append(bar)

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
