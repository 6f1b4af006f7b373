"""Each start of the daemon in the ledger (`ledger.runs`): the settings it runs with, secrets
left out, the code version, the broker and the venue; and its stop. `trader shortfall` replays
each stretch with the settings in force then, and sees the restarts."""

from __future__ import annotations

from contextlib import AsyncExitStack
from datetime import UTC, datetime

from structlog.typing import FilteringBoundLogger as Logger

import trader
from trader.config.record import recorded_settings, settings_digest, settings_text
from trader.config.schema import Settings
from trader.ledger.database import Database
from trader.ledger.runs import record_start, record_stop
from trader.runner import Venue


def venue_name(settings: Settings, venue: Venue) -> str:
    if venue.kind == "replay":
        return "replay"
    exchange = settings.exchange
    return "alpaca" if exchange.venue == "alpaca" else f"ccxt:{exchange.id}"


async def record_run(
    settings: Settings, database: Database, venue: Venue, stack: AsyncExitStack, log: Logger
) -> None:
    """The start now, and the stop when `stack` closes (before the ledger does). A start
    that cannot be recorded is said, as an error, and trades all the same: the record serves
    a later comparison, not the trading."""
    try:
        text = settings_text(recorded_settings(settings))
        digest = settings_digest(text)
        run_id = await record_start(
            database, settings_text=text, digest=digest, started_at=venue.clock.now(),
            wall_started_at=datetime.now(UTC), version=trader.__version__,
            broker=settings.broker.mode, venue=venue_name(settings, venue),
        )  # fmt: skip
    except Exception as error:
        log.error("run not recorded: trader shortfall cannot replay this start", error=repr(error))
        return
    log.info("run recorded", run=run_id, settings_digest=digest[:12])

    async def stopped() -> None:
        try:
            await record_stop(database, venue.clock.now())
        except Exception as error:  # a full disk: the run reads as killed, said here
            log.error("run stop not recorded", run=run_id, error=repr(error))

    stack.push_async_callback(stopped)
