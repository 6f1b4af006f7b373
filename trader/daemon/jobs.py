"""The daemon's periodic wall-clock jobs on APScheduler (AsyncIOScheduler, 3.x): quote polling,
reconciliation, the equity snapshot and the heartbeat. (The tick itself runs on the daemon's
clock, which a replay simulates: see `trader.daemon.ticks`.)

Every job runs one instance at a time (`max_instances=1`); runs that fell due while one was
still going, or while the loop was held up, collapse into one (`coalesce=True`); a run later
than its grace is skipped. Skipped runs are counted per job. A job that raises is logged and
runs again next time. A stop lets running jobs finish (within the deadline) rather than
cancelling them halfway through a reconciliation, and says nothing about APScheduler letting
go of them (it cancels its side of a running job when it shuts down).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from trader.logging import get_logger


class WallJobs:
    def __init__(self, on_skipped: Callable[[str], None] = lambda job: None) -> None:
        self.scheduler = AsyncIOScheduler(
            timezone=UTC,
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
        )
        self.scheduler.add_listener(self._on_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
        self.scheduler.add_listener(self._on_error, EVENT_JOB_ERROR)
        self._on_skipped = on_skipped
        self._running: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._log = get_logger("trader.jobs")

    def every(
        self,
        name: str,
        seconds: float,
        work: Callable[[], Awaitable[None]],
        *,
        grace_s: float | None = None,
        first_in_s: float = 0.0,
    ) -> None:
        """Run `work` every `seconds` (first after `first_in_s`); a run later than `grace_s`
        (default: one period) is skipped and counted."""

        async def job() -> None:
            # Shielded: APScheduler cancels its running jobs when it shuts down; ours finish.
            task = asyncio.ensure_future(work())
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not self._stopping:
                    raise
                # The scheduler shutting down let go of the run; `stop` waits for the work.

        self.scheduler.add_job(
            job,
            IntervalTrigger(seconds=seconds, timezone=UTC),
            id=name,
            name=name,
            next_run_time=datetime.now(UTC) + timedelta(seconds=first_in_s),
            misfire_grace_time=max(1, round(grace_s if grace_s is not None else seconds)),
        )

    def start(self) -> None:
        self.scheduler.start()

    async def stop(self, deadline_s: float) -> None:
        """No new runs; the running ones finish within the deadline, else are cancelled."""
        self._stopping = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        running = list(self._running)
        if running:
            _, late = await asyncio.wait(running, timeout=deadline_s)
            for task in late:
                self._log.warning("job cancelled at the stop deadline", job=task.get_name())
                task.cancel()

    def _on_event(self, event: JobEvent) -> None:
        self._on_skipped(event.job_id)
        if event.code == EVENT_JOB_MAX_INSTANCES:
            self._log.warning("job skipped: its last run is still going", job=event.job_id)
        else:
            self._log.warning("job skipped: too late to run", job=event.job_id)

    def _on_error(self, event: JobExecutionEvent) -> None:
        if isinstance(event.exception, asyncio.CancelledError):
            return
        self._log.error(
            "job failed",
            job=event.job_id,
            error=repr(event.exception)[:300],
            traceback=event.traceback,
        )
