"""How late the event loop runs what it was asked to run: the measure of whether anything
blocks it (a model call on the loop, a synchronous disk write, a CPU-bound parse).

A task asks to wake every `interval_s`; how much later than asked it actually wakes is the lag.
The exported figure is the worst lag over the trailing `window_s`, so a spike between two
scrapes is still seen.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable


class LoopLagMonitor:
    def __init__(
        self,
        *,
        interval_s: float = 0.05,
        window_s: float = 10.0,
        on_lag: Callable[[float], None] = lambda worst: None,
        keep: int = 100_000,
    ) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self._on_lag = on_lag
        self._recent: deque[tuple[float, float]] = deque()  # (when, lag) inside the window
        self.samples: deque[float] = deque(maxlen=keep)  # every lag, for percentiles

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            now = time.perf_counter()
            self.record(max(0.0, now - asked - self.interval_s), now)

    def record(self, lag: float, now: float) -> None:
        self.samples.append(lag)
        recent = self._recent
        while recent and recent[0][0] < now - self.window_s:
            recent.popleft()
        # Keep the window's maxima only: a sample below a later one can never be the worst.
        while recent and recent[-1][1] <= lag:
            recent.pop()
        recent.append((now, lag))
        self._on_lag(recent[0][1])

    def clear(self) -> None:
        self.samples.clear()


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]
