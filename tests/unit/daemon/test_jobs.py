"""The wall-clock jobs at a stop: a run under way finishes, and APScheduler letting go of it is
not reported as a failure (a stop during an exchange outage used to log an ERROR with a
CancelledError traceback)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from trader.daemon.jobs import WallJobs


async def test_a_run_under_way_at_the_stop_finishes_and_nothing_is_logged_as_failed(
    caplog: pytest.LogCaptureFixture,
):
    started, finished = asyncio.Event(), []

    async def slow_poll() -> None:
        started.set()
        await asyncio.sleep(0.3)  # an exchange call retrying
        finished.append(True)

    jobs = WallJobs()
    jobs.every("quotes", 60, slow_poll)
    with caplog.at_level(logging.INFO):
        jobs.start()
        await asyncio.wait_for(started.wait(), 5)
        await jobs.stop(deadline_s=5)
        await asyncio.sleep(0.05)  # APScheduler's side of the run ends after ours
    assert finished == [True]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
