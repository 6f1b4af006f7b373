"""The event-loop lag monitor sees a loop that is held up, and reports the window's worst."""

from __future__ import annotations

import asyncio
import time

from trader.daemon.loop_lag import LoopLagMonitor, percentile


async def test_a_blocked_loop_shows_as_lag():
    worst: list[float] = []
    monitor = LoopLagMonitor(interval_s=0.01, window_s=10, on_lag=worst.append)
    running = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    time.sleep(0.2)  # noqa: ASYNC251 - a call blocking the loop: what the monitor catches
    await asyncio.sleep(0.05)
    running.cancel()
    assert max(monitor.samples) >= 0.15
    assert worst[-1] >= 0.15  # still the window's worst after quieter samples


def test_the_window_keeps_its_worst_and_forgets_older_ones():
    worst: list[float] = []
    monitor = LoopLagMonitor(window_s=1.0, on_lag=worst.append)
    for now, lag in ((0.0, 0.5), (0.5, 0.1), (0.9, 0.2), (1.6, 0.05)):
        monitor.record(lag, now)
    assert worst == [0.5, 0.5, 0.5, 0.2]


def test_percentile_by_nearest_rank():
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([], 99) == 0.0
