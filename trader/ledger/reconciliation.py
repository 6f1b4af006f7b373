"""The ledger's side of reconciliation: what a broker needs to compare against, booking what
it found (in one transaction with the report), and the venue's baseline balances."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from trader.domain import Order, Portfolio
from trader.domain.fee_posting import posted_by_asset
from trader.domain.reconciliation import LedgerBook, ReconcileReport
from trader.ledger.codec import money_text, parse_time, time_text
from trader.ledger.database import Database, LedgerError, transaction
from trader.ledger.fees import FeeRecord, fee_record, write_corrections
from trader.ledger.trading import LedgerState, _fill, _order, _write_executions, _write_portfolio

order_from_row = _order
fill_from_row = _fill


class ReconciliationLedger:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def book_view(self, state: LedgerState, recent_since: datetime) -> LedgerBook:
        """`state` with every order id and fill id the ledger has, the orders with a venue id
        changed since `recent_since`, and the baseline."""

        def read(
            c: sqlite3.Connection,
        ) -> tuple[frozenset[str], frozenset[str], list[Order], FeeRecord]:
            orders = frozenset(r[0] for r in c.execute("SELECT client_order_id FROM orders"))
            fills = frozenset(r[0] for r in c.execute("SELECT fill_id FROM fills"))
            recent = c.execute(
                "SELECT * FROM orders WHERE exchange_order_id IS NOT NULL AND updated_at >= ?",
                (time_text(recent_since),),
            ).fetchall()
            estimated = c.execute("SELECT * FROM fills WHERE fee_estimated = 1 ORDER BY rowid")
            fees = fee_record(c, [fill_from_row(row) for row in estimated])
            return orders, fills, [order_from_row(row) for row in recent], fees

        orders, fills, recent, fees = await self._db.run(read)
        return LedgerBook(
            portfolio=state.portfolio,
            starting_cash=state.starting_cash,
            open_orders=state.open_orders,
            known_orders=orders,
            booked_fills=fills,
            baseline=await self.baseline(),
            recent_orders={o.exchange_order_id: o for o in recent if o.exchange_order_id},
            pending_fees=fees.pending,
            booked_postings=fees.booked_postings,
            posted_fees=posted_by_asset(fees.corrections),
        )

    async def book(self, report: ReconcileReport, portfolio: Portfolio) -> None:
        """The report's order changes and fills, its fee corrections after them (`portfolio`
        is the portfolio after both), and the report."""

        def write(c: sqlite3.Connection) -> None:
            with transaction(c):
                _write_executions(c, report.executions, portfolio, report.at, "reconciliation")
                written = write_corrections(c, report.fee_corrections, report.at)
                if len(written) != len(report.fee_corrections):
                    # `portfolio` counted them all: booking a part would break the ledger.
                    raise LedgerError("a fee posting in the report was booked already")
                if written:
                    _write_portfolio(c, portfolio, {x.symbol for x in written})
                c.execute(
                    "INSERT INTO reconciliations (at, broker, ok, summary, report) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (time_text(report.at), report.broker, int(report.ok), report.summary,
                     report.text),
                )  # fmt: skip

        await self._db.run(write)

    async def has_account(self) -> bool:
        row = await self._db.run(lambda c: c.execute("SELECT count(*) FROM account").fetchone())
        return bool(row[0])

    async def baseline(self) -> dict[str, Decimal] | None:
        rows = await self._db.run(
            lambda c: c.execute("SELECT asset, amount FROM venue_baseline").fetchall()
        )
        return {asset: Decimal(amount) for asset, amount in rows} if rows else None

    async def set_baseline(self, balances: Mapping[str, Decimal], at: datetime) -> None:
        """The venue's balances before the daemon's first trade; written once."""

        def write(c: sqlite3.Connection) -> None:
            with transaction(c):
                if c.execute("SELECT count(*) FROM venue_baseline").fetchone()[0]:
                    return
                c.executemany(
                    "INSERT INTO venue_baseline VALUES (?, ?, ?)",
                    [(a, money_text(v), time_text(at)) for a, v in sorted(balances.items())],
                )

        await self._db.run(write)

    async def last(self) -> tuple[datetime, bool, str] | None:
        """The last reconciliation: when, whether it was ok, and its summary."""
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT at, ok, summary FROM reconciliations ORDER BY id DESC LIMIT 1"
            ).fetchone()
        )
        return (parse_time(row[0]), bool(row[1]), row[2]) if row else None
