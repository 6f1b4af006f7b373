"""Stopping: the jobs stop, open orders are kept or cancelled (`broker.on_shutdown`), the
background tasks end (the MQTT link last, after its "offline" status), and what start-up
opened closes newest first: the engine, the feed, the ledger (checkpointed), the endpoint."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from structlog.typing import FilteringBoundLogger as Logger

from trader.domain import Order
from trader.ledger.database import Database
from trader.ledger.write_failure import write_failure
from trader.service.parts import Parts
from trader.service.status import status_event


async def shut_down(parts: Parts, stack: AsyncExitStack, log: Logger, exit_code: int = 0) -> None:
    parts.phase = "stopping"
    parts.readiness.mark("started", False, "stopping")
    parts.notifier.stopping()
    if parts.jobs is not None:
        await parts.jobs.stop(parts.settings.schedule.shutdown_deadline_s)
    await apply_shutdown_stance(parts, log)
    await stop_background(parts, "stopped")
    await stack.aclose()  # engine, feed, ledger (checkpointed), endpoint: newest first
    log.info("stopped", exit_code=exit_code)


async def stop_background(parts: Parts, reason: str) -> None:
    """Stop the background tasks; the MQTT link last, after its goodbye status."""
    for task in parts.tasks:
        if task.get_name() != "mqtt":
            task.cancel()
    if parts.link is not None:
        await parts.link.close(status_event(parts, "offline", reason=reason))
    for task in parts.tasks:
        task.cancel()
    await asyncio.gather(*parts.tasks, return_exceptions=True)


async def apply_shutdown_stance(parts: Parts, log: Logger) -> None:
    engine, venue, controller = parts.engine, parts.venue, parts.controller
    if engine is None or venue is None or controller is None:
        return
    orders = engine.broker.open_orders()
    if not orders:
        return
    if parts.settings.broker.on_shutdown == "keep":
        log.info("open orders kept", count=len(orders))
        return
    now = venue.clock.now()
    async with controller.lock:
        cancelled: list[Order] = []
        left: list[Order] = []
        for order in orders:
            try:
                execution = await engine.broker.cancel(order, now)
            except Exception as error:
                log.error("cancel failed", order=order.client_order_id, error=repr(error))
                continue
            if execution is None:
                continue
            # Fills found while cancelling are booked by the next start's reconciliation,
            # with everything else the venue did meanwhile; only the status is noted now.
            (left if execution.fills else cancelled).append(execution.order)
        await engine.ledger.record_orders(cancelled, now, "cancelled on shutdown")
    log.info("open orders cancelled", count=len(cancelled), filled_meanwhile=len(left))


async def close_ledger(database: Database, log: Logger) -> None:
    try:
        # Everything in the main file: the WAL is emptied (a copy of the file is whole).
        await database.run(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
    except Exception as error:
        if (reason := write_failure(error)) is not None:  # a full disk: said, not a bug
            log.error("ledger checkpoint failed", reason=reason, path=str(database.path))
        else:
            log.exception("ledger checkpoint failed")
    await database.close()
    log.info("ledger flushed", path=str(database.path))
