"""An order settled between ticks, when the venue's stream says it changed (Alpaca's trade
updates): the broker brings it up to the venue's state by the path its polls take, and what it
found is booked at once, in one ledger transaction, with the portfolio after it.

The engine owns the ledger and the portfolio: this runs on the daemon's loop under the tick
lock, never from the stream's thread, so a tick and a streamed update never interleave. The
broker's open orders carry what each has booked, so a fill is booked once whichever of the
stream and the next poll sees it first; a booking that fails takes the ledger's state up again
(the broker's included), and the next poll books the fill instead."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from trader.domain.execution import Execution
from trader.engine.pipeline import Engine
from trader.ledger.between_ticks import book_executions
from trader.logging import get_logger

DETAIL = "trade stream"  # the orders' history says which path booked them


@runtime_checkable
class SettlesNow(Protocol):
    """A broker that can settle one order on demand (the live broker)."""

    async def settle_now(self, client_order_id: str, at: datetime) -> Execution | None: ...


async def settle_between_ticks(
    engine: Engine, client_order_id: str, at: datetime
) -> Execution | None:
    """The order's news booked now; None when there was none (or the broker cannot say)."""
    broker = engine.broker
    if not isinstance(broker, SettlesNow):
        return None
    execution = await broker.settle_now(client_order_id, at)
    if execution is None:
        return None
    account = engine.account
    portfolio = account.portfolio
    for fill in execution.fills:
        portfolio = portfolio.apply(fill)
    try:
        await book_executions(engine.ledger.database, [execution], portfolio, at, DETAIL)
    except Exception:
        account.recover(await engine.ledger.load())
        raise
    account.portfolio = portfolio
    log = get_logger("trader.engine")
    for fill in execution.fills:
        log.info(
            "fill", symbol=fill.symbol, side=str(fill.side), amount=str(fill.amount),
            price=str(fill.price), fee=str(fill.fee), order=fill.client_order_id, via=DETAIL,
        )  # fmt: skip
    return execution
