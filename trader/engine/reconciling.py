"""One reconciliation: read the ledger, ask the broker, book what the ledger missed together
with the report. The engine runs it at start-up and on a schedule; `trader reconcile` runs it
on demand (as a dry run while a daemon holds the ledger)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from trader.broker.protocol import Broker
from trader.domain import Portfolio
from trader.domain.reconciliation import ReconcileReport, portfolio_after
from trader.ledger.funding import FundingRow
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger
from trader.logging import get_logger

RECENT_ORDERS = timedelta(days=1)  # ended orders a late fill may still arrive for


def _short(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:300]


async def reconcile_ledger(
    broker: Broker,
    ledger: TradingLedger,
    at: datetime,
    *,
    in_memory: Portfolio | None = None,
    dry_run: bool = False,
    on_funding: Callable[[Sequence[FundingRow]], None] | None = None,
) -> ReconcileReport:
    """The report, its findings booked unless `dry_run`. `in_memory` is the portfolio a running
    engine holds, which must equal the ledger's between ticks. `on_funding` is told the venue's
    funding rows once they are booked (the metrics' counters; a failure there is logged)."""
    log = get_logger("trader.reconcile")
    reconciliation = ReconciliationLedger(ledger.database)
    try:
        state = await ledger.load()
        book = await reconciliation.book_view(state, at - RECENT_ORDERS)
    except Exception as error:
        log.exception("the ledger cannot be read")
        return ReconcileReport(
            at, broker.name, problems=(f"the ledger cannot be read: {_short(error)}",)
        )
    problems = []
    if in_memory is not None and in_memory != state.portfolio:
        problems.append("the engine's portfolio differs from the ledger's")
    try:
        report = await broker.reconcile(book, at, dry_run=dry_run)
    except Exception as error:
        log.exception("the broker could not be reconciled")
        return ReconcileReport(
            at, broker.name, problems=tuple(problems), incomplete=_short(error), dry_run=dry_run
        )
    if problems:
        report = replace(report, problems=(*problems, *report.problems))
    if dry_run:
        return report
    try:
        after = portfolio_after(state.portfolio, report.executions, report.fee_corrections)
        booked = await reconciliation.book(report, after)
    except Exception as error:
        log.exception("the reconciliation could not be booked")
        problem = f"what the broker reported could not be booked: {_short(error)}"
        return replace(report, problems=(*report.problems, problem))
    if on_funding is not None and booked:
        try:
            on_funding(booked)
        except Exception:  # telemetry never fails a reconciliation
            log.exception("the booked funding rows could not be counted")
    return report
