"""Booking an order's news between ticks (a venue's stream reported a fill): its order row, its
fills and the positions and cash after them, in one transaction, as a tick books its own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from trader.domain import Portfolio
from trader.domain.execution import Execution
from trader.ledger.database import Database, Statements
from trader.ledger.trading import _write_executions


async def book_executions(
    database: Database,
    executions: Sequence[Execution],
    portfolio: Portfolio,
    at: datetime,
    detail: str,
) -> None:
    """`executions` and `portfolio` (the book after them), whole or not at all."""

    def write(c: Statements) -> None:
        _write_executions(c, executions, portfolio, at, detail)

    await database.write(write)
